"""Exit status of every ``gramopt`` command (the one place they are written).

0 success; 1 ``--check`` found a change; 2 bad input or usage (one line
``file:line:col: error: …``); 3 verification found a difference (nothing written);
70 an internal error (a bug: one line, the traceback with GRAMOPT_DEBUG=1); 130 interrupted
(Ctrl-C); 143 terminated (SIGTERM: a supervisor's stop, handled like Ctrl-C).
"""

EXIT_OK = 0
EXIT_CHANGED = 1
EXIT_USAGE = 2
EXIT_UNSOUND = 3
EXIT_INTERNAL = 70
EXIT_INTERRUPTED = 130
EXIT_TERMINATED = 143
