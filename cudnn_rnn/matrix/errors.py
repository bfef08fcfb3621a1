"""The two errors of bad input, at the bottom of the harness so every layer can raise them
and the commands (:func:`cudnn_rnn.cli.run_main`) turn them into one line and exit 2."""


class BadInput(Exception):
    """Wrong arguments or files: printed as one line, exit code 2."""


class MalformedResults(ValueError):
    """A results file whose records cannot be read (not a torn last line)."""


# what reading or rendering a recorded file raises where a value has the wrong form or a
# field is missing that no check of the file covers: the file's fault, said in one line by
# the command that read it (the committed runs and tables render: their tests)
UNREPORTABLE = (KeyError, TypeError, AttributeError, IndexError, ValueError, RecursionError)
