"""Tests of ucx-ifunc-cc (run from the source tree:
/usr/bin/python3 -m unittest discover -s tools/tests -t tools)."""
