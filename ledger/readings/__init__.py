"""What the store reads, as plain arrays and rows: `steps.StepColumns` (a run's step rows,
column by column) and `evidence` (what `ledger why` reasons over). It sits below both the
store, which fills them, and the analysis, which reads them; it knows neither."""
