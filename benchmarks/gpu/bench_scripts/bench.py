import argparse
import sys

from tachyon.bench import cli

p = argparse.ArgumentParser()
cli.register(p.add_subparsers(dest="c", required=True))
a = p.parse_args(sys.argv[1:])
sys.exit(a.func(a))
