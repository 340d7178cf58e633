"""``python -m tidemq`` runs the ``tidemq`` command line."""

from tidemq.cli import main

if __name__ == "__main__":
    main()
