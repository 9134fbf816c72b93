# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of the typed-header decoder that ``rocketlite.protocol.headers._compile`` writes.

``Decoder(cls, table, defaults, helpers)`` is built once per header class and key set from the
same field table as the pure decoder, and called with the ext fields of each request. Same
results and same errors: the rare paths (a non-string value, a sign, an out-of-range or
malformed number, a boolean in another case, a missing field) call the very helpers the pure
decoder calls. ``tests/unit/native/test_headers_twin.py`` checks the two against each other.
"""

from cpython.dict cimport PyDict_GetItem
from cpython.object cimport Py_TYPE, PyObject, descrsetfunc
from cpython.unicode cimport PyUnicode_GET_LENGTH, PyUnicode_READ_CHAR


cdef enum:
    KIND_STR = 0
    KIND_INT = 1
    KIND_BOOL = 2


cdef class _Slot:
    cdef object key
    cdef int kind
    cdef bint required
    cdef object default
    cdef Py_ssize_t digits  # any run of this many ASCII digits is in the field's range
    cdef object field  # the pure decoder's _Field, for the slow paths
    cdef object descr  # the slot's member descriptor
    cdef descrsetfunc setter


cdef class Decoder:
    cdef object cls
    cdef list slots
    cdef object as_text, missing, slow_int, slow_bool, bools, absent

    def __init__(self, cls, table, defaults, helpers):
        self.cls = cls
        self.as_text, self.missing, self.slow_int, self.slow_bool, self.bools, self.absent = helpers
        self.slots = []
        cdef _Slot s
        for f in table:
            s = _Slot()
            s.key = f.key
            s.kind = f.kind
            s.required = f.required
            s.default = defaults[f.attr]
            s.digits = len(str(f.hi)) - 1
            s.field = f
            s.descr = cls.__dict__[f.attr]
            s.setter = Py_TYPE(s.descr).tp_descr_set
            if s.setter is NULL:
                raise TypeError(f"{cls.__name__}.{f.attr} is not a slot")
            self.slots.append(s)

    def __call__(self, ext):
        cdef dict d = ext if type(ext) is dict else dict(ext)
        cdef list values = []
        cdef _Slot s
        cdef PyObject* raw
        cdef object v, out
        for s in self.slots:
            raw = PyDict_GetItem(d, s.key)
            if raw is NULL or <object>raw is None:
                if s.required:
                    raise self.missing(self.cls, s.key)
                values.append(s.default)
                continue
            v = <object>raw
            if type(v) is not str:
                v = self.as_text(v)
            if s.kind == KIND_STR:
                out = v
            elif s.kind == KIND_INT:
                out = _digits(v, s.digits)
                if out is None:
                    out = self.slow_int(self.cls, s.field, v)
                    if out is self.absent:
                        out = s.default
            else:
                out = self.bools.get(v)
                if out is None:
                    out = self.slow_bool(self.cls, s.field, v)
                    if out is self.absent:
                        out = s.default
            values.append(out)
        o = self.cls.__new__(self.cls)
        cdef Py_ssize_t i
        for i in range(len(self.slots)):
            s = <_Slot>self.slots[i]
            s.setter(s.descr, o, values[i])
        return o


cdef object _digits(str v, Py_ssize_t most):
    """``int(v)`` when ``v`` is 1 to ``most`` ASCII digits, else None (the slow path decides)."""
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(v), i
    cdef Py_UCS4 c
    cdef long long acc = 0
    if n == 0 or n > most:
        return None
    for i in range(n):
        c = PyUnicode_READ_CHAR(v, i)
        if c < 48 or c > 57:
            return None
        acc = acc * 10 + (<long long>c - 48)
    return acc
