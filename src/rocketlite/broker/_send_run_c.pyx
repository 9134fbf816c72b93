# cython: language_level=3, boundscheck=False, wraparound=False, cdivision=True
"""Compiled twin of ``rocketlite.broker.send_run.SendTakerPy``: the usual single sends of a run
of requests turned into the store's messages in one call. What "usual" means, and why anything
else stops the run, is documented there; ``tests/unit/native/test_send_run_twin.py`` checks the
two against each other. The message is built through its slots' C setters."""

from cpython.dict cimport PyDict_GetItem, PyDict_SetItem
from cpython.list cimport PyList_GET_ITEM, PyList_GET_SIZE
from cpython.object cimport Py_TYPE, PyObject, descrsetfunc
from cpython.unicode cimport PyUnicode_GET_LENGTH, PyUnicode_READ_CHAR

cdef enum:
    NKEYS = 14
    NFIELDS = 11
    TXN_MASK = 0x4 | 0x8

_MESSAGE_FIELDS = ("topic", "body", "queue_id", "flag", "properties", "sys_flag",
                   "born_timestamp", "born_host", "born_port", "reconsume_times",
                   "prepared_transaction_offset")


cdef class SendTaker:
    cdef object cls
    cdef dict keys  # request code -> tuple of NKEYS wire keys
    cdef object not_allowed
    cdef long perm_write
    cdef list descrs
    cdef descrsetfunc setters[NFIELDS]
    cdef object zero, empty

    def __init__(self, message_cls, keys, not_allowed, perm_write):
        fields = getattr(message_cls, "__slots__", ())
        if tuple(fields) != _MESSAGE_FIELDS:
            raise TypeError(f"{message_cls.__name__} has fields {fields}, the taker knows "
                            f"{_MESSAGE_FIELDS}")
        self.keys = {}
        for code, k in keys.items():
            if len(k) != NKEYS:
                raise TypeError(f"request code {code}: {len(k)} keys, the taker reads {NKEYS}")
            self.keys[int(code)] = tuple(k)
        self.cls = message_cls
        self.not_allowed = not_allowed
        self.perm_write = perm_write
        self.descrs = [message_cls.__dict__[name] for name in _MESSAGE_FIELDS]
        cdef int i
        for i in range(NFIELDS):
            self.setters[i] = Py_TYPE(self.descrs[i]).tp_descr_set
            if self.setters[i] is NULL:
                raise TypeError(f"{message_cls.__name__}.{_MESSAGE_FIELDS[i]} is not a slot")
        self.zero = 0
        self.empty = ""

    def take(self, conn, list cmds, Py_ssize_t start, table, bint diverting, list msgs,
             list pending):
        cdef dict writable = {}
        cdef dict ext
        cdef tuple keys
        cdef PyObject* raw
        cdef PyObject* kraw
        cdef long long queue_id, sys_flag, born, flag, reconsume, queues
        cdef Py_ssize_t i = start, n = PyList_GET_SIZE(cmds)
        cdef list d = self.descrs
        host = conn.peer_host
        port = conn.peer_port
        while i < n:
            cmd = <object>PyList_GET_ITEM(cmds, i)
            kraw = PyDict_GetItem(self.keys, cmd.code)
            if kraw is NULL:
                return i
            keys = <tuple>kraw
            e = cmd.ext_fields
            if type(e) is not dict:
                return i
            ext = <dict>e
            if not _is_str(ext, keys[0]) or not _is_str(ext, keys[2]):
                return i
            raw = PyDict_GetItem(ext, keys[1])
            if raw is NULL or type(<object>raw) is not str:
                return i
            topic = <object>raw
            if (_int(ext, keys[3], 9) < 0):
                return i
            queue_id = _int(ext, keys[4], 9)
            sys_flag = _int(ext, keys[5], 9)
            born = _int(ext, keys[6], 18)
            flag = _int(ext, keys[7], 9)
            if queue_id < 0 or sys_flag < 0 or born < 0 or flag < 0:
                return i
            raw = PyDict_GetItem(ext, keys[8])
            if raw is NULL or <object>raw is None:
                props = self.empty
            elif type(<object>raw) is str:
                props = <object>raw
            else:
                return i
            reconsume = 0
            if _present(ext, keys[9]):
                reconsume = _int(ext, keys[9], 9)
                if reconsume < 0:
                    return i
            if _present(ext, keys[10]) and _bool(ext, keys[10]) < 0:
                return i
            if _present(ext, keys[11]) and _bool(ext, keys[11]) != 0:  # a batch, or not usual
                return i
            if _present(ext, keys[12]) and _int(ext, keys[12], 9) < 0:
                return i
            if _present(ext, keys[13]) and not _is_str(ext, keys[13]):
                return i
            raw = PyDict_GetItem(writable, topic)
            if raw is NULL:
                tc = table.get(topic)
                if tc is None or not tc.perm & self.perm_write or topic in self.not_allowed:
                    queues = 0
                else:
                    queues = tc.writeQueueNums
                PyDict_SetItem(writable, topic, queues)
            else:
                queues = <object>raw
            if queue_id >= queues:
                return i
            if diverting and (sys_flag & TXN_MASK or "DELAY\x01" in props or "TIMER_" in props):
                return i
            o = self.cls.__new__(self.cls)
            self.setters[0](d[0], o, topic)
            self.setters[1](d[1], o, cmd.body)
            self.setters[2](d[2], o, queue_id)
            self.setters[3](d[3], o, flag)
            self.setters[4](d[4], o, props)
            self.setters[5](d[5], o, sys_flag)
            self.setters[6](d[6], o, born)
            self.setters[7](d[7], o, host)
            self.setters[8](d[8], o, port)
            self.setters[9](d[9], o, reconsume)
            self.setters[10](d[10], o, self.zero)
            msgs.append(o)
            pending.append((conn, cmd, queue_id))
            i += 1
        return i


cdef inline bint _present(dict ext, object key):
    cdef PyObject* raw = PyDict_GetItem(ext, key)
    return raw is not NULL and <object>raw is not None


cdef inline bint _is_str(dict ext, object key):
    cdef PyObject* raw = PyDict_GetItem(ext, key)
    return raw is not NULL and type(<object>raw) is str


cdef long long _int(dict ext, object key, Py_ssize_t most):
    """The value of 1 to ``most`` ASCII digits at ``key``, else -1 (absent or not that form)."""
    cdef PyObject* raw = PyDict_GetItem(ext, key)
    if raw is NULL or type(<object>raw) is not str:
        return -1
    cdef str v = <str>raw
    cdef Py_ssize_t n = PyUnicode_GET_LENGTH(v), i
    cdef Py_UCS4 c
    cdef long long acc = 0
    if n == 0 or n > most:
        return -1
    for i in range(n):
        c = PyUnicode_READ_CHAR(v, i)
        if c < 48 or c > 57:
            return -1
        acc = acc * 10 + (<long long>c - 48)
    return acc


cdef int _bool(dict ext, object key):
    """1 for ``true``/``1``, 0 for ``false``/``0``, -1 for anything else."""
    cdef PyObject* raw = PyDict_GetItem(ext, key)
    if raw is NULL or type(<object>raw) is not str:
        return -1
    v = <str>raw
    if v == "false" or v == "0":
        return 0
    if v == "true" or v == "1":
        return 1
    return -1
