"""``python -m ropekit.cli`` (and ``accelerate launch -m ropekit.cli finetune ...``)."""

from ropekit.cli.app import main

if __name__ == "__main__":
    main()
