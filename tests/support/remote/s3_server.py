"""Serves moto's S3-compatible API on 127.0.0.1 at a port the system picks, for the fleet cache's
tests: prints that port on one line, then serves until its standard input closes (the test
stopped it, or the test process died) or it is killed. Run with the interpreter that
scripts/setup.sh installed moto into."""

import os
import sys

from moto.server import ThreadedMotoServer


def main() -> None:
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    _, port = server.get_host_and_port()
    print(port, flush=True)
    # Whatever moto prints later goes to the log (stderr): a full stdout pipe that nobody reads
    # would stall the server.
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())
    sys.stdin.buffer.read()
    server.stop()


if __name__ == "__main__":
    main()
