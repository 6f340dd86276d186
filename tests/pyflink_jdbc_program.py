"""PyFlink's JdbcSink documentation example as PyFlink's docs write it, with ``pyflink`` replaced by ``runtime``: the
unit tests check the job it declares, the integration tests run it against the session's server."""


def declare_books_job(url: str, user: str, password: str):
    """The example's job, writing to ``url``; returns its environment (not executed)."""
    from runtime.common.typeinfo import Types
    from runtime.datastream import StreamExecutionEnvironment
    from runtime.datastream.connectors.jdbc import JdbcConnectionOptions, JdbcExecutionOptions, JdbcSink

    env = StreamExecutionEnvironment.get_execution_environment()
    type_info = Types.ROW([Types.INT(), Types.STRING(), Types.STRING(), Types.INT()])
    ds = env.from_collection([(101, "Stream Processing with Apache Flink", "Fabian Hueske, Vasiliki Kalavri", 2019),
                              (102, "Streaming Systems", "Tyler Akidau, Slava Chernyak, Reuven Lax", 2018),
                              (103, "Designing Data-Intensive Applications", "Martin Kleppmann", 2017),
                              (104, "Kafka: The Definitive Guide", "Gwen Shapira, Neha Narkhede, Todd Palino", 2017)],
                             type_info=type_info)
    ds.add_sink(
        JdbcSink.sink(
            "insert into books (id, title, authors, year) values (?, ?, ?, ?)",
            type_info,
            JdbcConnectionOptions.JdbcConnectionOptionsBuilder()
            .with_url(url)
            .with_driver_name("org.postgresql.Driver")
            .with_user_name(user)
            .with_password(password)
            .build(),
            JdbcExecutionOptions.builder()
            .with_batch_interval_ms(1000)
            .with_batch_size(200)
            .with_max_retries(5)
            .build()
        ))
    return env
