"""The agent's Prometheus output, in one room; the HTTP side is agentd/api/scrape.py.

    families.py    the agent's metric families (runs, samplers, monitor, event-loop lag, host),
                   read from its live objects at scrape time
    names.py       mimesys metric names -> Prometheus names (node_exporter's style, base units)
    telemetry.py   what the agent measures about itself (histograms, segment errors, latest window)
    textfile.py    an offline replay as a node_exporter textfile (the same families)
"""
