"""The matrix harness: probe specs (:mod:`.spec`), a cell's life (:mod:`.execute`), the worker
process that runs cells and named jobs (:mod:`.worker`, :mod:`.jobs`), the record and its
one reader and writer (:mod:`.record`), where runs go (:mod:`.runs`), provenance, progress
and the seed's replay. Imports the checks and the engine, never a command or a comparison."""
