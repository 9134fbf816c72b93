# cython: language_level=3
"""Big-endian integers read from a byte pointer: shared by the compiled twins (``cimport``).
Bounds are the caller's: every use checks the length before it reads."""

from libc.stdint cimport int16_t, int32_t, int64_t, uint32_t, uint64_t


cdef inline uint32_t be_u32(const unsigned char* p) noexcept nogil:
    return (<uint32_t>p[0] << 24) | (<uint32_t>p[1] << 16) | (<uint32_t>p[2] << 8) | <uint32_t>p[3]


cdef inline int32_t be_i32(const unsigned char* p) noexcept nogil:
    return <int32_t>be_u32(p)


cdef inline int16_t be_i16(const unsigned char* p) noexcept nogil:
    return <int16_t>((<uint32_t>p[0] << 8) | <uint32_t>p[1])


cdef inline int64_t be_i64(const unsigned char* p) noexcept nogil:
    return <int64_t>((<uint64_t>be_u32(p) << 32) | <uint64_t>be_u32(p + 4))
