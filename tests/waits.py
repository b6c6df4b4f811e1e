"""How long a test waits for an event: a process to finish or start answering, a file to be
written, a server's answer, a version to load.

SAFETY_NET seconds: a net that ends a hung test, never a measurement, so that a slow CPU
passes where a fast one does. Speed is measured by bench/, never asserted by a test.
"""

SAFETY_NET = 900
