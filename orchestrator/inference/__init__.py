"""`mltrain infer`: the MLPerf Inference half of a comparison. The plan (model, scenario, options,
checks of a model file and a dataset before anything runs), the harness job on the runner the user
picked, LoadGen's logs read into a typed record, the Server scenario's QPS search, comparisons of
stored inference runs. The harness itself is workload-side code (a folder with an inference.yaml)."""
