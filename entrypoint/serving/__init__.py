"""What the keep-alive bridge serves beside the relay: access control, status, swapping, the watchdog.

bridge.py relays bytes; each concern it grows lives here, one module each.
"""
