"""Turning probe results (JSON Lines + run.json) into reports.

Reads only what the probe and the benchmark wrote, through the matrix's one reader
(:func:`cudnn_rnn.matrix.record.read_records`); it never imports the runner (worker, cell,
flow: ``tests/test_layers.py`` checks it). :mod:`.load` reads result sets, :mod:`.analysis`
answers the questions the report asks, :mod:`.constraints` holds the documented rules and
checks them against the measurement, :mod:`.grid` labels each matrix entry, and
:mod:`.markdown`, :mod:`.html`, :mod:`.diff` and :mod:`.matrix` write the files;
:mod:`.bench` and :mod:`.bench_markdown` do the same for the benchmark.
"""
