/* bench/floor/floor.c: the kernel's floor for a keep-alive static answer. A server with no
 * HTTP in it: one thread, epoll, every "\r\n\r\n" it reads is a request and gets the same
 * prebuilt answer (as long as the one gearshift gives for /1k.bin), sent with one send(2)
 * per batch of reads. It parses nothing, opens no file, keeps no clock, logs nothing: what
 * it costs per request is what the kernel's TCP, epoll and scheduling cost, which no
 * epoll server can go below on this machine. bench/static runs it beside the real servers
 * (SERVERS="floor ...") for the 1 KiB file only: every request gets a 1,024-byte body (for
 * larger files it would copy where the real servers use sendfile, and be no floor).
 * Usage: floor  (prints "port N" once listening on 127.0.0.1). */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXC 4096
#define BUF 16384

struct conn { int fd; int tail; char in[BUF]; };
static struct conn *conns[MAXC];
struct answer { char *bytes; size_t len; };
static struct answer small;

static struct answer build(size_t body) {
    const char *head = "HTTP/1.1 200 OK\r\nServer: floor\r\nDate: Fri, 27 Nov 2026 18:00:00 GMT\r\n"
                       "Content-Type: application/octet-stream\r\nLast-Modified: Fri, 27 Nov 2026 17:00:00 GMT\r\n"
                       "ETag: \"65f0a1b2-400\"\r\nAccept-Ranges: bytes\r\nCache-Control: max-age=0\r\n"
                       "Content-Length: ";
    char hdr[1024];
    int h = snprintf(hdr, sizeof hdr, "%s%zu\r\n\r\n", head, body);
    struct answer a = { malloc((size_t)h + body), (size_t)h + body };
    memcpy(a.bytes, hdr, (size_t)h);
    memset(a.bytes + h, 'x', body);
    return a;
}
static char out[BUF * 16];

static void drop(int ep, struct conn *c) {
    epoll_ctl(ep, EPOLL_CTL_DEL, c->fd, NULL);
    close(c->fd);
    conns[c->fd] = NULL;
    free(c);
}

int main(int argc, char **argv) {
    (void)argc;
    (void)argv;
    small = build(1024);

    int ls = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in a = { .sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK) };
    socklen_t al = sizeof a;
    if (bind(ls, (struct sockaddr *)&a, sizeof a) || listen(ls, 1024)) { perror("listen"); return 1; }
    getsockname(ls, (struct sockaddr *)&a, &al);
    printf("port %d\n", ntohs(a.sin_port));
    fflush(stdout);

    int ep = epoll_create1(EPOLL_CLOEXEC);
    struct epoll_event ev = { .events = EPOLLIN, .data.fd = -1 };
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    struct epoll_event evs[256];
    for (;;) {
        int n = epoll_wait(ep, evs, 256, -1);
        for (int i = 0; i < n; i++) {
            if (evs[i].data.fd == -1) {
                int fd;
                while ((fd = accept4(ls, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC)) >= 0) {
                    if (fd >= MAXC) { close(fd); continue; }
                    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
                    struct conn *c = calloc(1, sizeof *c);
                    c->fd = fd;
                    conns[fd] = c;
                    struct epoll_event ce = { .events = EPOLLIN | EPOLLRDHUP, .data.fd = fd };
                    epoll_ctl(ep, EPOLL_CTL_ADD, fd, &ce);
                }
                continue;
            }
            struct conn *c = conns[evs[i].data.fd];
            if (!c) continue;
            ssize_t r = recv(c->fd, c->in + c->tail, BUF - c->tail, 0);
            if (r <= 0) {
                if (r < 0 && errno == EAGAIN) continue;
                drop(ep, c);
                continue;
            }
            c->tail += (int)r;
            size_t o = 0;
            int start = 0;
            for (;;) {
                char *e = memmem(c->in + start, (size_t)(c->tail - start), "\r\n\r\n", 4);
                if (!e) break;
                const struct answer *ans = &small;
                start = (int)(e - c->in) + 4;
                if (o + ans->len <= sizeof out) { memcpy(out + o, ans->bytes, ans->len); o += ans->len; }
            }
            memmove(c->in, c->in + start, (size_t)(c->tail - start));
            c->tail -= start;
            if (c->tail == BUF) { drop(ep, c); continue; }
            /* Answers are small and the client reads them: a short send is not handled
             * (the floor measures the common case only). */
            if (o && send(c->fd, out, o, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno != EAGAIN) drop(ep, c);
        }
    }
}
