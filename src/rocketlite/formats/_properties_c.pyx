# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of the property-string codecs in ``rocketlite.formats.properties``.

Same signatures and results as the pure functions there (``_decode_properties_py``,
``_find_property_py``), which stay the reference: ``tests/unit/formats/test_native_twins.py``
feeds both the same input. The property string's layout is documented in that module.
"""

from cpython.unicode cimport PyUnicode_DecodeUTF8


def decode_properties(str text):
    """``name \\x01 value \\x02`` entries -> dict; entries shorter than 3 characters or without a
    name or a value are skipped; a later name wins."""
    cdef dict out = {}
    cdef Py_ssize_t n = len(text), i = 0, start, sep
    cdef Py_UCS4 c
    while i < n:
        start = i
        sep = -1
        while i < n:
            c = text[i]
            if c == 2:
                break
            if c == 1 and sep < 0:
                sep = i
            i += 1
        if i - start >= 3 and start < sep < i - 1:
            out[text[start:sep]] = text[sep + 1:i]
        i += 1
    return out


def find_property(bytes props, bytes name):
    """The value of the entry ``name`` (given with its trailing ``\\x01``) as text, or None when
    absent or empty; a match counts only at the start of an entry."""
    cdef const unsigned char* p = props
    cdef Py_ssize_t n = len(props), i, start, end
    i = props.find(name)
    while i > 0 and p[i - 1] != 2:
        i = props.find(name, i + 1)
    if i < 0:
        return None
    start = i + len(name)
    end = start
    while end < n and p[end] != 2:
        end += 1
    if end == start:
        return None
    return PyUnicode_DecodeUTF8(<const char*>p + start, end - start, "replace")
