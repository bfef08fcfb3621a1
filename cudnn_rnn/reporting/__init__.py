"""Turning probe results (JSON Lines + run.json) into reports.

Reads only what the probe wrote: it never imports the runner (worker, cell, flow).
:mod:`.load` reads result sets, :mod:`.analysis` answers the questions the report
asks, :mod:`.constraints` holds the documented rules and checks them against the
measurement, :mod:`.markdown`, :mod:`.html` and :mod:`.diff` write the files.
"""
