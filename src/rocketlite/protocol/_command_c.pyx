# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of the frame decoding in ``rocketlite.protocol.command``: ``FrameDecoder._split``
(every whole frame of a read) and ``_decode`` (one frame's command).

The byte layout is documented in that module. This twin decodes the common, well-formed frame in
C: the length fields, a JSON header whose fields have their usual types (after ``orjson.loads``),
a ROCKETMQ binary header, and the ``RemotingCommand`` built through its slots' C setters. Anything
else (a malformed or unusual header: numbers out of range, a language or remark of another type,
non-string ext values) goes to the pure ``_json_command`` / ``_binary_command``, so errors and
lenient coercions are the reference's own. ``split`` also bounds a request's ext fields: one
with more than the decoder's ``max_ext_fields`` is its ``ExtFieldsLimitError``, whichever path
built it. ``tests/unit/native/test_command_twin.py`` checks the two decoders against each other.
"""

from cpython.bytes cimport PyBytes_AS_STRING, PyBytes_FromStringAndSize, PyBytes_GET_SIZE
from cpython.dict cimport PyDict_GetItem, PyDict_Next, PyDict_SetItem
from cpython.object cimport Py_TYPE, PyObject, descrsetfunc
from cpython.unicode cimport PyUnicode_DecodeUTF8
from rocketlite.common._bytes cimport be_i16, be_i32, be_i64, be_u32
from libc.stdint cimport int16_t, int32_t, uint32_t

cdef enum:
    JSON = 0
    ROCKETMQ = 1
    HEADER_LEN_MAX = 0xFFFFFF
    BINARY_FIXED_SIZE = 13





cdef class Codec:
    """Built once by ``command.py`` with what the decoding shares with the pure path."""

    cdef object cls, loads, json_command, binary_command, protocol_error, undecodable
    cdef object language_names, language_by_value, other
    cdef object empty
    cdef list descrs
    cdef descrsetfunc setters[9]

    def __init__(self, cls, fields, loads, json_command, binary_command, protocol_error,
                 undecodable, language_names, language_by_value, other):
        self.cls = cls
        self.loads = loads
        self.json_command = json_command
        self.binary_command = binary_command
        self.protocol_error = protocol_error
        self.undecodable = undecodable
        self.language_names = language_names
        self.language_by_value = language_by_value
        self.other = other
        self.empty = b""
        if len(fields) != 9:
            raise TypeError(f"RemotingCommand has {len(fields)} fields, the twin knows 9")
        self.descrs = [cls.__dict__[name] for name in fields]
        cdef int i
        for i in range(9):
            self.setters[i] = Py_TYPE(self.descrs[i]).tp_descr_set
            if self.setters[i] is NULL:
                raise TypeError(f"RemotingCommand.{fields[i]} is not a slot")

    cdef object _command(self, object code, object language, object version, object opaque,
                         object flag, object remark, object ext, object body, object stype):
        o = self.cls.__new__(self.cls)
        cdef list d = self.descrs
        self.setters[0](d[0], o, code)
        self.setters[1](d[1], o, language)
        self.setters[2](d[2], o, version)
        self.setters[3](d[3], o, opaque)
        self.setters[4](d[4], o, flag)
        self.setters[5](d[5], o, remark)
        self.setters[6](d[6], o, ext)
        self.setters[7](d[7], o, body)
        self.setters[8](d[8], o, stype)
        return o

    cdef object _json(self, bytes header, object body):
        """The pure ``_json_command`` for anything but a header of the usual types."""
        try:
            obj = self.loads(header)
        except Exception:
            return self.json_command(header, body)  # the reference raises the right error
        if type(obj) is not dict:
            return self.json_command(header, body)
        cdef dict d = <dict>obj
        cdef PyObject* raw
        opaque = _int32_or_none(d, "opaque", None)
        flag = _int32_or_none(d, "flag", 0)
        code = _int32_or_none(d, "code", None)
        version = _int32_or_none(d, "version", 0)
        if opaque is None or flag is None or code is None or version is None:
            return self.json_command(header, body)
        raw = PyDict_GetItem(d, "language")
        language = "JAVA" if raw is NULL else <object>raw
        if type(language) is not str or language not in self.language_names:
            return self.json_command(header, body)
        raw = PyDict_GetItem(d, "remark")
        remark = None if raw is NULL else <object>raw
        if remark is not None and type(remark) is not str:
            return self.json_command(header, body)
        raw = PyDict_GetItem(d, "extFields")
        cdef Py_ssize_t it = 0
        cdef PyObject* k
        cdef PyObject* v
        if raw is NULL or <object>raw is None:
            ext = {}
        elif type(<object>raw) is dict:
            ext = <object>raw
            while PyDict_Next(ext, &it, &k, &v):
                if type(<object>v) is not str:
                    return self.json_command(header, body)
        else:
            return self.json_command(header, body)
        return self._command(code, language, version, opaque, flag, remark, ext, body, JSON)

    cdef object _binary(self, bytes header, object body):
        """A well-formed ROCKETMQ header; else the pure ``_binary_command`` (and its error)."""
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(header)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(header), pos, end, klen, vlen, kstart, vstart
        cdef int32_t rlen, ext_len
        if n < BINARY_FIXED_SIZE + 8:
            return self.binary_command(header, body)
        cdef int16_t code = be_i16(p), version = be_i16(p + 3)
        cdef int language = <signed char>p[2]
        cdef int32_t opaque = be_i32(p + 5), flag = be_i32(p + 9)
        pos = BINARY_FIXED_SIZE
        rlen = be_i32(p + pos)
        pos += 4
        if rlen < 0 or rlen > n - pos - 4:
            return self.binary_command(header, body)
        remark = None
        try:
            if rlen:
                remark = PyUnicode_DecodeUTF8(<const char*>p + pos, rlen, NULL)
            pos += rlen
            ext_len = be_i32(p + pos)
            pos += 4
            if ext_len < 0 or pos + ext_len != n:
                return self.binary_command(header, body)
            ext = {}
            end = n
            while pos < end:
                if end - pos < 6:
                    return self.binary_command(header, body)
                klen = be_i16(p + pos)
                kstart = pos + 2
                if klen < 0 or end - (kstart + klen) < 4:
                    return self.binary_command(header, body)
                vlen = be_i32(p + kstart + klen)
                vstart = kstart + klen + 4
                pos = vstart + vlen
                if vlen < 0 or pos > end:
                    return self.binary_command(header, body)
                PyDict_SetItem(ext, PyUnicode_DecodeUTF8(<const char*>p + kstart, klen, NULL),
                               PyUnicode_DecodeUTF8(<const char*>p + vstart, vlen, NULL))
        except UnicodeDecodeError:
            return self.binary_command(header, body)
        lang = self.language_by_value[language] if 0 <= language < len(self.language_by_value) \
            else self.other
        return self._command(code, lang, version, opaque, flag, remark, ext, body, ROCKETMQ)

    def decode(self, buf, Py_ssize_t start, Py_ssize_t end):
        """Twin of ``command._decode``: the command in ``buf[start:end]`` (a frame without its
        length field). Raises ``ProtocolError``."""
        return self._decode(buf, start, end)

    cdef object _decode(self, buf, Py_ssize_t start, Py_ssize_t end):
        cdef bytes data = buf if type(buf) is bytes else bytes(buf)
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
        cdef uint32_t ori
        cdef Py_ssize_t hlen, hstart, hend
        cdef unsigned int stype
        if end - start < 4:
            raise self.protocol_error(
                f"frame of {end - start} bytes is too short for its header length field")
        ori = be_u32(p + start)
        hstart = start + 4
        hlen = ori & HEADER_LEN_MAX
        hend = hstart + hlen
        if hend > end:
            raise self.protocol_error(
                f"header length {hlen} exceeds the {end - hstart} bytes left in the frame")
        body = PyBytes_FromStringAndSize(<const char*>p + hend, end - hend) if hend < end \
            else self.empty
        stype = ori >> 24
        header = PyBytes_FromStringAndSize(<const char*>p + hstart, hlen)
        if stype == JSON:
            return self._json(header, body)
        if stype == ROCKETMQ:
            return self._binary(header, body)
        raise self.protocol_error(
            f"unknown serialize type {stype} (header length field {ori:#010x})")

    def split(self, decoder, bytes data, Py_ssize_t pos, list out):
        """Twin of ``FrameDecoder._split``: decode every whole frame of ``data`` from ``pos`` into
        ``out``; return where the incomplete rest starts. A bad length is the decoder's
        ``_check_length`` error (stream-fatal); a bad frame is its item in ``out``, and so is a
        request above the decoder's ``max_ext_fields`` (its ``_too_many_ext_fields`` error)."""
        cdef const unsigned char* p = <const unsigned char*>PyBytes_AS_STRING(data)
        cdef Py_ssize_t n = PyBytes_GET_SIZE(data), start, end
        cdef long long max_length = decoder._max_length
        cdef long long max_header = decoder._max_header
        cdef Py_ssize_t max_ext = decoder._max_ext_fields
        cdef int32_t length
        cdef Py_ssize_t hlen
        while n - pos >= 4:
            length = be_i32(p + pos)
            if not 0 <= length <= max_length:
                decoder._check_length(length)
            start = pos + 4
            end = start + length
            if end > n:
                break
            if length >= 4:
                hlen = be_u32(p + start) & HEADER_LEN_MAX
                if hlen > max_header:
                    out.append(decoder._header_too_large(hlen))
                    pos = end
                    continue
            try:
                o = self._decode(data, start, end)
            except self.protocol_error as e:
                out.append(e)
            except MemoryError:
                raise
            except Exception as e:
                out.append(self.undecodable(e))
            else:  # counted as decoded, whichever path built it (as _split_py counts)
                if len(o.ext_fields) > max_ext and not o.flag & 1:
                    o = decoder._too_many_ext_fields(o)
                out.append(o)
            pos = end
        return pos


cdef object _int32_or_none(dict d, str key, object absent):
    """The value of ``key`` when it is an int in int32 range (or ``absent`` when missing), else
    None: the header is unusual and the pure path decides."""
    cdef PyObject* raw = PyDict_GetItem(d, key)
    if raw is NULL:
        return absent
    v = <object>raw
    if type(v) is not int or not -0x80000000 <= v <= 0x7FFFFFFF:
        return None
    return v
