"""The bridge's side of a swap set: when to swap, who waits and draining (scheduler.py, the Swapper); one model's
facts, state, waiting requests and failed-swap hold (model.py); the channel's bridge end and the pod's swap progress
(link.py); how a model comes up, by restart (restart.py) or vLLM's sleep mode (sleep.py). The launcher does what it
asks to the processes (launcher/swap/); the messages between the two are entrypoint/swapchannel.py's.
"""
