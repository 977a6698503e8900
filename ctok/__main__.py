"""``python -m ctok`` runs the command line (see ctok/cli.py)."""
import sys

from ctok.cli import main

sys.exit(main())
