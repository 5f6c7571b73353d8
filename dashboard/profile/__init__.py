"""Profile: what each node costs on each backend (issue 18).

``model`` is the record (the JSON contract every surface reads, with its tables: ``frame``,
``by_op_type``, ``by_scope``, ``overlay``, ``compare``); ``run.profile_model`` is the one entry point
(checks the input, runs the ``profile`` worker command through ``runtime.jobs.run_command``);
``measure`` runs the profiled sessions in the worker, ``parse`` reads QNN's profiling CSV and ONNX
Runtime's trace, ``mapping`` puts their rows back on the model's nodes; ``aihub`` imports a profile
downloaded from Qualcomm AI Hub.
"""
