"""``python -m credrank.cli …``: the ``credrank`` command."""

from credrank.cli import main

if __name__ == "__main__":
    main()
