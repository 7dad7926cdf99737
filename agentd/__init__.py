"""mimesys node agent: runs compiled stressor plans, samples the host, serves traces.

The daemon only: the formats it shares with the controller live in the core (mimesys/).
This package must import and run without PyTorch and never imports the controller.
"""
