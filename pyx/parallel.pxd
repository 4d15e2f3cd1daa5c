# Shared by the OpenMP kernels (cimport bnpcore.kernels.parallel).

cdef enum:
    # Doubles of padding (128 bytes) after each thread's row of a per-thread
    # scratch or accumulator array: rows of different threads then never share
    # a cache line, which the threads would otherwise write alternately for
    # every token (false sharing).
    PAD = 16
