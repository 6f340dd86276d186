"""The ``chandy`` command.

    chandy --version
    chandy demo [--records N --keys K --parallelism P]   run the reference job on local Spark
    chandy pyfiles chandy.zip                            zip Chandy for spark-submit --py-files
    chandy checkpoints DIR                               completed checkpoints of the job directory DIR
    chandy checkpoints STORAGE                           the jobs in a checkpoint storage, and their checkpoints
    chandy checkpoint DIR ID|latest                      one checkpoint: operators, files, key groups, offsets
    chandy checkpoint SAVEPOINT                          the same for a savepoint (or a chk-<n> directory)
    chandy savepoint DIR [--path P] [--timeout S]        take a savepoint of the job running with DIR
    chandy stop DIR [--path P] [--drain] [--timeout S]   stop that job with a savepoint
    chandy jobs [URL]                                    the jobs of the driver whose dashboard is at URL
    chandy status URL                                    a job's state, throughput and checkpoints
    chandy cancel URL                                    cancel a job
    chandy trigger-checkpoint URL                        take a checkpoint now and wait for it
    chandy state show PATH [ID|latest] [--uid U --state S]   a checkpoint's state (runtime.state_api)
    chandy state export PATH [ID|latest] --uid U --state S --to FILE.parquet|FILE.csv

DIR is the job's directory, ``<checkpoint storage>/<job name>`` (the job name as a folder name, see
:func:`~state_backends.storage.job_directory_name`), as a path or any fsspec URL. A running job publishes there,
in ``_job.json``, where its driver's REST API answers and with which token (and certificate, in HTTPS);
``savepoint`` and ``stop`` ask it for the savepoint, wait for it (``--timeout``, default 600 s) and print its URL,
which ``restore_from`` takes. URL is a job's dashboard address as its log prints it
(``http://host:8081/#/jobs/<id>``), or the driver's (``http://host:8081``, default ``http://localhost:8081``) when
one job runs there. Every command that talks to a driver does it through its REST API
(:mod:`runtime.tools.rest_commands`). Errors go to stderr, with exit code 2; a directory that does not exist is
one:

>>> import contextlib, sys
>>> with contextlib.redirect_stderr(sys.stdout):
...     main(["checkpoints", "memory://cli-doc/no-such-job"])
chandy: memory://cli-doc/no-such-job does not exist. DIR must be the job's checkpoint directory, ...
2
"""

from __future__ import annotations

import argparse
import sys

__all__ = ["main"]


def main(argv: list[str] | None = None) -> int:
    from runtime import __version__

    parser = argparse.ArgumentParser(prog="chandy", description="Chandy: exactly-once stream processing on Spark.")
    parser.add_argument("--version", action="version", version=f"chandy {__version__}")
    commands = parser.add_subparsers(dest="command")
    commands.add_parser("demo", help="run the reference job on local Spark and check its result",
                        add_help=False)
    pyfiles = commands.add_parser("pyfiles", help="zip Chandy's packages for spark-submit --py-files")
    pyfiles.add_argument("destination", nargs="?", default="chandy.zip")
    listing = commands.add_parser("checkpoints", help="list the completed checkpoints of a job directory "
                                  "(<checkpoint storage>/<job name>); given the storage, list its jobs")
    listing.add_argument("directory")
    showing = commands.add_parser("checkpoint", help="show one checkpoint")
    showing.add_argument("directory")
    showing.add_argument("checkpoint_id", nargs="?", help="a checkpoint id, or 'latest' for the newest restorable "
                         "one; without it, DIR is a savepoint's directory or a chk-<n> directory")
    saving = commands.add_parser("savepoint", help="take a savepoint of the job running with this job directory")
    stopping = commands.add_parser("stop", help="stop the job running with this job directory with a savepoint")
    for command in (saving, stopping):
        command.add_argument("directory")
        command.add_argument("--path", help="directory to put the savepoint under (default: the job's default)")
        command.add_argument("--timeout", type=float, default=600.0,
                             help="seconds to wait for the savepoint (default 600)")
    stopping.add_argument("--drain", action="store_true",
                          help="end the input as if exhausted: the final watermark fires every timer and window")
    listing_jobs = commands.add_parser("jobs", help="list the jobs of a driver (its dashboard's URL)")
    listing_jobs.add_argument("url", nargs="?", default=None, help="default http://localhost:8081")
    for name, text in (("status", "a job's state, throughput and checkpoints"), ("cancel", "cancel a job"),
                       ("trigger-checkpoint", "take a checkpoint of a job now and wait until it completed")):
        commands.add_parser(name, help=text).add_argument("url", help="the job's dashboard URL (or the driver's)")
    state = commands.add_parser("state", help="read a savepoint's or a checkpoint's state")
    state.add_argument("action", choices=("show", "export"))
    state.add_argument("directory", help="a savepoint's or a chk-<n> directory, or a job's directory with ID")
    state.add_argument("checkpoint_id", nargs="?", help="a checkpoint id, or 'latest', of a job's directory")
    state.add_argument("--uid", help="the operator's uid")
    state.add_argument("--state", help="the state's name")
    state.add_argument("--key", help="show only this key (compared as text)")
    state.add_argument("--limit", type=int, default=20, help="rows to show (default 20)")
    state.add_argument("--to", help="export: the .parquet or .csv file to write")
    args, rest = parser.parse_known_args(argv)
    if args.command == "demo":
        from runtime.tools.demo import main as demo

        return demo(rest)
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    if args.command == "pyfiles":
        from runtime.tools.packaging import build_pyfiles_zip

        print(build_pyfiles_zip(args.destination))
        return 0
    if args.command in ("checkpoints", "checkpoint"):
        from runtime.errors import ChandyError
        from runtime.tools.checkpoint_inspection import (
            describe_checkpoint,
            list_checkpoints,
        )

        try:
            if args.command == "checkpoints":
                print(list_checkpoints(args.directory))
            else:
                print(describe_checkpoint(args.directory, args.checkpoint_id))
        except ChandyError as exc:
            print(f"chandy: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command in ("savepoint", "stop"):
        from runtime.errors import ChandyError
        from runtime.tools import rest_commands

        try:
            if args.command == "savepoint":
                print(rest_commands.savepoint(args.directory, args.path, args.timeout))
            else:
                print(rest_commands.stop(args.directory, args.path, args.drain, args.timeout))
        except ChandyError as exc:
            print(f"chandy: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command in ("jobs", "status", "cancel", "trigger-checkpoint"):
        from runtime.errors import ChandyError
        from runtime.tools import rest_commands

        action = {"jobs": rest_commands.jobs, "status": rest_commands.status, "cancel": rest_commands.cancel,
                  "trigger-checkpoint": rest_commands.trigger_checkpoint}[args.command]
        try:
            print(action(args.url or rest_commands.DEFAULT_URL))
        except ChandyError as exc:
            print(f"chandy: {exc}", file=sys.stderr)
            return 2
        return 0
    if args.command == "state":
        from runtime.errors import ChandyError
        from runtime.tools.state_commands import export_state, show_state

        try:
            if args.action == "show":
                print(show_state(args.directory, args.checkpoint_id, args.uid, args.state, args.key, args.limit))
            elif not (args.uid and args.state and args.to):
                parser.error("chandy state export needs --uid, --state and --to")
            else:
                print(export_state(args.directory, args.checkpoint_id, args.uid, args.state, args.to))
        except ChandyError as exc:
            print(f"chandy: {exc}", file=sys.stderr)
            return 2
        return 0
    parser.print_help()
    return 0


if __name__ == "__main__":
    sys.exit(main())
