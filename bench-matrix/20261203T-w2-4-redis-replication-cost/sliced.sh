#!/bin/bash
python3 /tmp/s29/slice.py ${FC_SLICE_NS:-100000} $$
exec /tmp/fc-tip "$@"
