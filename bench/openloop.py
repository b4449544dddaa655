# Benchmark (a): open and close one file 200,000 times.
import os
import sys

path = os.path.expanduser(sys.argv[1]) if len(sys.argv) > 1 else "/etc/hostname"
for _ in range(200_000):
    os.close(os.open(path, os.O_RDONLY))
