"""`promo ... | head`: a reader that leaves early ends the command quietly (no traceback, no
"unexpected error"), with the exit status a shell gives a command stopped by a closed pipe."""

from __future__ import annotations

import subprocess
import sys

SCRIPT = """
import sys
import promo_assets.cli.main as cli
def many_lines(args):
    for i in range(200_000):
        print("row", i)
    return 0
parser = cli.build_parser
def patched():
    p = parser()
    p._subparsers._group_actions[0].choices["models"].set_defaults(func=many_lines)
    return p
cli.build_parser = patched
sys.exit(cli.main(["models"]))
"""


def test_a_closed_pipe_ends_the_command_quietly():
    proc = subprocess.Popen([sys.executable, "-c", SCRIPT], stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    first = proc.stdout.readline()
    proc.stdout.close()  # like `| head -1`
    err = proc.stderr.read().decode()
    assert first == b"row 0\n"
    assert proc.wait(timeout=60) == 141, err
    assert err == "", err
