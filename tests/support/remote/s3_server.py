"""Serves moto's S3-compatible API on 127.0.0.1 at a port the system picks, for the fleet cache's
tests: prints that port on one line, then serves until its standard input closes (the test
stopped it, or the test process died) or it is killed. Run with the interpreter that
scripts/setup.sh installed moto into."""

import os
import sys
import threading

from moto.s3.responses import S3Response
from moto.server import ThreadedMotoServer

# moto checks a PUT's If-None-Match / If-Match and then writes, with nothing between the two:
# requests served on other threads can all pass the check. S3 does both at once, and the fleet
# cache's create-if-absent writes (compile leases, entries) rely on that, so the check and the
# write are made one step here.
_PUT_LOCK = threading.Lock()
_put_object = S3Response.put_object


def _put_object_atomically(self):
    with _PUT_LOCK:
        return _put_object(self)


S3Response.put_object = _put_object_atomically


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
