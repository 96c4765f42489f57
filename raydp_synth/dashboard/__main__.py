"""``raydp-synth dashboard`` (also ``python -m raydp_synth.dashboard``): Prometheus and
Grafana for the Ray session on this machine, with raydp_synth's budget dashboard.

Run it on the head node while (or before) a study runs; it stays in the foreground
until Ctrl-C. See :mod:`raydp_synth.dashboard.launch` and docs/ray-cluster.md,
section 5.
"""

from __future__ import annotations

import argparse
import logging
from pathlib import Path

from raydp_synth.cli import add_version_argument, run_cli
from raydp_synth.dashboard.launch import (
    DEFAULT_GRAFANA_PORT,
    DEFAULT_PROMETHEUS_PORT,
    find_session,
    serve,
)
from raydp_synth.errors import ConfigError
from raydp_synth.log import configure_console

__all__ = ["build_parser", "main"]


def build_parser(prog: str = "raydp-synth dashboard") -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=prog,
        description="Start Prometheus and Grafana on the Ray session's own configuration "
        "(as Ray documents), with raydp_synth's dashboard of the privacy budget per study "
        "and the trials' metrics; Ctrl-C stops them. Nothing is downloaded: both programs "
        "come from the PATH.")
    parser.add_argument("--session-dir", type=Path, default=None, metavar="DIR",
                        help="the Ray session folder (default: the latest on this machine, "
                        "/tmp/ray/session_latest or under $RAY_TMPDIR/ray)")
    parser.add_argument("--host", default="127.0.0.1",
                        help="address to listen on (default 127.0.0.1; 0.0.0.0 for other "
                        "machines, which then reach the ports unauthenticated)")
    parser.add_argument("--prometheus-port", type=int, default=DEFAULT_PROMETHEUS_PORT,
                        help=f"default {DEFAULT_PROMETHEUS_PORT}, where Ray's dashboard looks")
    parser.add_argument("--grafana-port", type=int, default=DEFAULT_GRAFANA_PORT,
                        help=f"default {DEFAULT_GRAFANA_PORT}, where Ray's dashboard looks")
    parser.add_argument("--scrape-interval", type=float, default=10.0, metavar="SECONDS",
                        help="how often Prometheus reads the nodes' metrics (default 10, "
                        "Ray's)")
    parser.add_argument("--prometheus", default=None, metavar="PATH",
                        help="the prometheus program (default: from the PATH)")
    parser.add_argument("--grafana", default=None, metavar="PATH",
                        help="the grafana (or grafana-server) program (default: from the PATH)")
    parser.add_argument("--grafana-home", type=Path, default=None, metavar="DIR",
                        help="Grafana's home folder (default: /usr/share/grafana or next to "
                        "the program)")
    parser.add_argument("--no-grafana", action="store_true", help="run Prometheus only")
    add_version_argument(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    configure_console()
    logging.getLogger("raydp_synth.dashboard").setLevel(logging.INFO)
    for flag, port in (("--prometheus-port", args.prometheus_port),
                       ("--grafana-port", args.grafana_port)):
        if not 0 < port < 65536:
            raise ConfigError(f"{flag} {port} must be a port number (1-65535)")
    serve(find_session(args.session_dir), host=args.host, prometheus_port=args.prometheus_port,
          grafana_port=args.grafana_port, scrape_interval_s=args.scrape_interval,
          prometheus=args.prometheus, grafana=args.grafana, grafana_home=args.grafana_home,
          with_grafana=not args.no_grafana)
    return 0


if __name__ == "__main__":
    run_cli(main)
