/* tcp_loopback: a TCP stream over 127.0.0.1 between two sockets of the same thread: each
 * unit sends one message without blocking and drains whatever has arrived on the other
 * end, so both the send and the receive path run on the pinned CPU and nothing else
 * (no helper thread) consumes CPU. One unit = one send; bytes = bytes sent.
 * `nodelay` sets TCP_NODELAY on the sender, so that small messages leave as one packet each
 * (request-sized traffic: many packets, few bytes) even when an ACK is late; on an idle
 * loopback the drain acks every send at once and Nagle would hold nothing back anyway.
 * `recv_bytes` is the drain's buffer (one recv() takes at most that much; 256 KiB by default). */
#define _GNU_SOURCE
#include "../stressor.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct tcp_state { int tx, rx; uint8_t *msg, *sink; uint64_t len, rlen; };

static void *tcp_thread_setup(struct stressor *s, int thread, char *err) {
    (void)thread;
    struct tcp_state *st = calloc(1, sizeof *st);
    if (param_u64(s, "message_bytes", 65536, &st->len, err) ||
        param_u64(s, "recv_bytes", 1 << 18, &st->rlen, err)) { free(st); return NULL; }
    if (st->len < 1) st->len = 1;
    if (st->rlen < 1) st->rlen = 1;
    st->msg = malloc(st->len);
    st->sink = malloc(st->rlen);
    memset(st->msg, 0x42, st->len);
    struct sockaddr_in addr = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    socklen_t alen = sizeof addr;
    int lst = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (lst < 0 || bind(lst, (struct sockaddr *)&addr, sizeof addr) || listen(lst, 1) ||
        getsockname(lst, (struct sockaddr *)&addr, &alen)) {
        snprintf(err, ERRLEN, "%s: loopback listener: %s", s->name, strerror(errno));
        return NULL;
    }
    st->tx = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (connect(st->tx, (struct sockaddr *)&addr, sizeof addr)) {
        snprintf(err, ERRLEN, "%s: connect to loopback: %s", s->name, strerror(errno));
        return NULL;
    }
    int one = 1;
    if (param_bool(s, "nodelay", 0) && setsockopt(st->tx, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one)) {
        snprintf(err, ERRLEN, "%s: TCP_NODELAY: %s", s->name, strerror(errno));
        return NULL;
    }
    st->rx = accept4(lst, NULL, NULL, SOCK_CLOEXEC);
    close(lst);
    if (st->rx < 0) { snprintf(err, ERRLEN, "%s: accept: %s", s->name, strerror(errno)); return NULL; }
    return st;
}

static uint64_t tcp_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s;
    struct tcp_state *st = ts;
    uint64_t ops = 0;
    for (uint64_t u = 0; u < units; u++) {
        ssize_t n = send(st->tx, st->msg, st->len, MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) { *bytes += (uint64_t)n; ops++; }
        while (recv(st->rx, st->sink, st->rlen, MSG_DONTWAIT) > 0) {}
    }
    return ops;
}

static void tcp_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct tcp_state *st = ts;
    close(st->tx); close(st->rx);
    free(st->msg); free(st->sink); free(st);
}

const struct kernel_ops kernel_tcp_loopback = {
    .name = "tcp_loopback", .thread_setup = tcp_thread_setup, .step = tcp_step,
    .thread_teardown = tcp_thread_teardown,
};
