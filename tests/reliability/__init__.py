"""Reliability: faults, load and a soak, over real transports and real processes.

The broker survives what happens to the processes and the machine around it
(a server or a brokering process killed at the worst moment, a full disk,
permissions changed under it, the OS out of file watches) and heavy use, and
afterwards the user's files hold their old content or the new one complete,
no temporary file is left, no lock is held and everyone else went on.
"""
