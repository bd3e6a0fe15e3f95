"""Runs a command and prints its peak resident memory in KiB.

    python3 peak_rss.py OUT_FILE CMD...   (CMD's stdout goes to OUT_FILE; exits with CMD's code)

Run this as a fresh process: Linux carries a process's memory high-water
mark across exec, so a command forked straight from a large process (pytest
holding arrays) reports the parent's size. From this small interpreter the
command starts small, and wait4 gives its own peak."""
import os
import subprocess
import sys

with open(sys.argv[1], "w") as out:
    p = subprocess.Popen(sys.argv[2:], stdout=out)
    _, status, usage = os.wait4(p.pid, 0)
print(usage.ru_maxrss, file=sys.stderr)
sys.exit(os.waitstatus_to_exitcode(status))
