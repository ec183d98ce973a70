"""What MLPerf defines: reading MLLOG, the scoring rules, MLCommons' own tools (compliance, RCP,
package checker, result summarizer) run on a run's source, the MLCommons export and layout,
system descriptions, and the table of published results."""
