#!/usr/bin/python3
"""FaaST Python worker entry point.

    /usr/bin/python3 worker.py --host 127.0.0.1 --port P --worker-id ID

Started by the host with cwd = the function app's directory.
"""
import os
import sys

_HERE = os.path.dirname(os.path.abspath(__file__))
# The worker's own azure.functions must win over any installed copy.
if sys.path[:1] != [_HERE]:
    sys.path.insert(0, _HERE)

if __name__ == "__main__":
    from faast_worker.main import main
    main(sys.argv[1:])
