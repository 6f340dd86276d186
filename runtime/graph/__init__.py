"""The job graph (chains, edges, partitioners) and its compilation from the API's transformations."""
