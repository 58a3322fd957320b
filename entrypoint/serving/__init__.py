"""The keep-alive bridge's process: its command line (main), the ASGI chain built in one place (app: front door,
routing, the key decided once, the status page, idle activity, the watchdog's tracking, the relay) and every
concern beside it, one module each: vLLM's health (health: one GET /health and its last answer for all), the key
(auth), every write to a client (response), the status page (status, monitor, phases, metrics, gpus), the
watchdog, swapping (swap), the journal, idle stop (podstop). bridge.py runs it; what the launcher gives it is
../contract.py, and nothing else of the launcher's.
"""
