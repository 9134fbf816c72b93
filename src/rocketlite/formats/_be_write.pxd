# cython: language_level=3
"""Big-endian integers written to a byte pointer: shared by the compiled record encoders
(``cimport``). Bounds are the caller's."""

from libc.stdint cimport int64_t, uint32_t, uint64_t


cdef inline void _be32(char* p, uint32_t v) noexcept nogil:
    p[0] = <char>((v >> 24) & 0xFF)
    p[1] = <char>((v >> 16) & 0xFF)
    p[2] = <char>((v >> 8) & 0xFF)
    p[3] = <char>(v & 0xFF)


cdef inline void _be64(char* p, int64_t v) noexcept nogil:
    _be32(p, <uint32_t>(<uint64_t>v >> 32))
    _be32(p + 4, <uint32_t>v)
