# cython: language_level=3, boundscheck=False, wraparound=False
"""Compiled twin of ``rocketlite.formats.javahash.java_string_hash`` (Java's ``String.hashCode``).

A string whose characters are each one UTF-16 code unit (below U+D800, or U+E000 to U+FFFF) is
hashed here; any other (astral characters, lone surrogates: rare in tags and keys) goes to the
pure function, errors included. ``tests/unit/native/test_javahash_twin.py`` checks the two.
"""

from cpython.unicode cimport PyUnicode_GET_LENGTH, PyUnicode_READ_CHAR
from libc.stdint cimport int32_t, uint32_t


cdef class Hasher:
    cdef object pure

    def __init__(self, pure):
        self.pure = pure

    def __call__(self, str s):
        cdef Py_ssize_t n = PyUnicode_GET_LENGTH(s), i
        cdef Py_UCS4 c
        cdef uint32_t h = 0
        for i in range(n):
            c = PyUnicode_READ_CHAR(s, i)
            if c >= 0xD800 and (c < 0xE000 or c > 0xFFFF):
                return self.pure(s)
            h = 31 * h + <uint32_t>c
        return <int32_t>h
