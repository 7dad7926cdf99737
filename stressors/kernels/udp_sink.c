/* udp_sink: UDP datagrams to the configured sink address (--udp-sink, default
 * 127.0.0.1:9, the discard port: nobody needs to listen, the datagrams still cross the
 * interface). One unit = one datagram; bytes = payload bytes sent. */
#define _GNU_SOURCE
#include "../stressor.h"
#include <arpa/inet.h>
#include <errno.h>
#include <netdb.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

struct udp_state { int fd; uint8_t *msg; uint64_t len; struct sockaddr_storage dst; socklen_t dlen; };

static void *udp_thread_setup(struct stressor *s, int thread, char *err) {
    (void)thread;
    struct udp_state *st = calloc(1, sizeof *st);
    if (param_u64(s, "message_bytes", 1400, &st->len, err)) { free(st); return NULL; }
    st->msg = malloc(st->len);
    memset(st->msg, 0x55, st->len);
    struct addrinfo hints = {.ai_socktype = SOCK_DGRAM, .ai_flags = AI_NUMERICSERV}, *res;
    char port[16];
    snprintf(port, sizeof port, "%d", s->env->udp_sink_port);
    int rc = getaddrinfo(s->env->udp_sink_host, port, &hints, &res);
    if (rc) {
        snprintf(err, ERRLEN, "%s: sink %s:%s: %s", s->name, s->env->udp_sink_host, port, gai_strerror(rc));
        return NULL;
    }
    memcpy(&st->dst, res->ai_addr, res->ai_addrlen);
    st->dlen = res->ai_addrlen;
    st->fd = socket(res->ai_family, SOCK_DGRAM | SOCK_CLOEXEC, 0);
    freeaddrinfo(res);
    if (st->fd < 0) { snprintf(err, ERRLEN, "%s: socket: %s", s->name, strerror(errno)); return NULL; }
    return st;
}

static uint64_t udp_step(struct stressor *s, void *ts, uint64_t units, uint64_t deadline_ns, uint64_t *bytes) {
    (void)s;
    struct udp_state *st = ts;
    uint64_t ops = 0;
    for (uint64_t u = 0; u < units; u++) {
        ssize_t n = sendto(st->fd, st->msg, st->len, MSG_DONTWAIT, (struct sockaddr *)&st->dst, st->dlen);
        if (n > 0) { *bytes += (uint64_t)n; ops++; }
    }
    return ops;
}

static void udp_thread_teardown(struct stressor *s, void *ts) {
    (void)s;
    struct udp_state *st = ts;
    close(st->fd); free(st->msg); free(st);
}

const struct kernel_ops kernel_udp_sink = {
    .name = "udp_sink", .thread_setup = udp_thread_setup, .step = udp_step,
    .thread_teardown = udp_thread_teardown,
};
