"""The launcher's side of a swap set: which models and how they swap (plan.py, sleepmode.py), decided at start;
the channel's launcher end and what a swap does to processes (control.py); what the bridge asks of them (orders.py).
The bridge decides when to swap (serving/swap/); the messages between the two are entrypoint/swapchannel.py's.
"""
