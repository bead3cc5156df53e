-- The callback-shaped request (bench/README.md), for wrk: what tickd sends
-- for a task of tickd_load.js --shape callback, but Host and Content-Length
-- (wrk's own) and the task id and due (fixed here). run.sh's floors send it
-- (the receiver's limit, wrk's CPU a request; volley.c writes the same), and
-- tests/integration/test_bench_shape.py checks it against tickd's.
wrk.method = "POST"
wrk.body = '{"order":"A-1042","action":"remind","note":"' .. string.rep("x", 56) .. '"}'
wrk.headers["User-Agent"] = "tickd/1"
wrk.headers["Accept"] = "*/*"
wrk.headers["Content-Type"] = "application/json"
wrk.headers["tickd-task-id"] = "202611261200.3.1795723200000.k7Fq2LmN9pXc4RtY8vBw1Z"
wrk.headers["tickd-attempt"] = "1"
wrk.headers["tickd-scheduled-at"] = "1795723200000"
wrk.headers["traceparent"] = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
