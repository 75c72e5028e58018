// POLLRDHUP (kiln_socket_hung_up) is a GNU extension.
#define _GNU_SOURCE
#include "CMicroHTTPD.h"

#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

// libmicrohttpd logs through a printf-style callback; format it here so Swift sees one string.
static void kiln_mhd_log_trampoline(void *cls, const char *format, va_list arguments) {
    struct kiln_mhd_options *options = cls;
    char message[1024];
    vsnprintf(message, sizeof message, format, arguments);
    size_t length = strlen(message);
    while (length > 0 && (message[length - 1] == '\n' || message[length - 1] == '\r')) {
        message[--length] = '\0';
    }
    options->logger(options->logger_cls, message);
}

// The request deadline. libmicrohttpd 0.9.75 has none: its idle timeout restarts with
// every byte. Each connection is tracked from its start (NOTIFY_CONNECTION) to its end; a
// thread looks once a second for one whose head, or body, is overdue and shuts its socket
// down, which libmicrohttpd sees as the client leaving and closes. shutdown(2), not
// close(2): the descriptor stays libmicrohttpd's, and the entry is removed (under the same
// lock) before libmicrohttpd closes it, so no reused descriptor is ever touched.
enum kiln_phase { KILN_HEAD, KILN_BODY, KILN_ANSWERING };

struct kiln_connection {
    struct kiln_connection *prev, *next;
    MHD_socket fd;
    enum kiln_phase phase;
    struct timespec since;               // when the current phase began (CLOCK_MONOTONIC)
    unsigned calls;                      // access-handler calls for the current request
    int cut;
};

struct kiln_watch {
    pthread_mutex_t lock;
    pthread_cond_t wake;
    struct kiln_connection *head;
    unsigned int deadline;
    int stopping;
    int running;
    unsigned long cuts;
    pthread_t thread;
    MHD_AccessHandlerCallback access;
    MHD_RequestCompletedCallback completed;
};

static struct timespec kiln_now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return t;
}

static void *kiln_watch_run(void *arg) {
    struct kiln_watch *w = arg;
    pthread_mutex_lock(&w->lock);
    while (!w->stopping) {
        struct timespec until;
        clock_gettime(CLOCK_MONOTONIC, &until);
        until.tv_sec += 1;
        pthread_cond_timedwait(&w->wake, &w->lock, &until);
        if (w->stopping) break;
        struct timespec now = kiln_now();
        for (struct kiln_connection *c = w->head; c != NULL; c = c->next) {
            if (c->phase == KILN_ANSWERING || c->cut) continue;
            long long elapsed_ms = (long long)(now.tv_sec - c->since.tv_sec) * 1000 + (now.tv_nsec - c->since.tv_nsec) / 1000000;
            if (elapsed_ms >= (long long)w->deadline * 1000) {
                shutdown(c->fd, SHUT_RDWR);
                c->cut = 1;
                w->cuts++;
            }
        }
    }
    pthread_mutex_unlock(&w->lock);
    return NULL;
}

static struct kiln_connection *kiln_entry(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
    return info == NULL ? NULL : info->socket_context;
}

static void kiln_notify_connection(void *cls, struct MHD_Connection *connection, void **socket_context,
                                   enum MHD_ConnectionNotificationCode code) {
    struct kiln_watch *w = cls;
    if (code == MHD_CONNECTION_NOTIFY_STARTED) {
        const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
        struct kiln_connection *c = calloc(1, sizeof *c);
        if (c == NULL || info == NULL) { free(c); *socket_context = NULL; return; }
        c->fd = info->connect_fd;
        c->phase = KILN_HEAD;
        c->since = kiln_now();
        pthread_mutex_lock(&w->lock);
        c->next = w->head;
        if (w->head != NULL) w->head->prev = c;
        w->head = c;
        pthread_mutex_unlock(&w->lock);
        *socket_context = c;
    } else if (code == MHD_CONNECTION_NOTIFY_CLOSED) {
        struct kiln_connection *c = *socket_context;
        if (c == NULL) return;
        pthread_mutex_lock(&w->lock);
        if (c->prev != NULL) c->prev->next = c->next; else w->head = c->next;
        if (c->next != NULL) c->next->prev = c->prev;
        pthread_mutex_unlock(&w->lock);
        free(c);
        *socket_context = NULL;
    }
}

// The first call of a request brings its head; a later call with no data, its body's end
// (the handler answers then). From there the request is the handler's and the response's.
static enum MHD_Result kiln_access(void *cls, struct MHD_Connection *connection, const char *url, const char *method,
                                   const char *version, const char *upload_data, size_t *upload_data_size, void **req_cls) {
    struct kiln_mhd_options *options = cls;
    struct kiln_watch *w = options->watch;
    struct kiln_connection *c = kiln_entry(connection);
    if (c != NULL) {
        pthread_mutex_lock(&w->lock);
        c->calls++;
        if (c->calls == 1) { c->phase = KILN_BODY; c->since = kiln_now(); }
        else if (*upload_data_size == 0) c->phase = KILN_ANSWERING;
        pthread_mutex_unlock(&w->lock);
    }
    return w->access(options->access_handler_cls, connection, url, method, version, upload_data, upload_data_size, req_cls);
}

// A response sent: the next request's head is awaited from now (keep-alive).
static void kiln_completed(void *cls, struct MHD_Connection *connection, void **req_cls,
                           enum MHD_RequestTerminationCode code) {
    struct kiln_mhd_options *options = cls;
    struct kiln_watch *w = options->watch;
    struct kiln_connection *c = kiln_entry(connection);
    if (c != NULL) {
        pthread_mutex_lock(&w->lock);
        c->calls = 0;
        c->phase = KILN_HEAD;
        c->since = kiln_now();
        pthread_mutex_unlock(&w->lock);
    }
    if (w->completed != NULL) w->completed(options->request_completed_cls, connection, req_cls, code);
}

static void kiln_watch_stop(struct kiln_watch *w) {
    if (w == NULL) return;
    if (w->running) {
        pthread_mutex_lock(&w->lock);
        w->stopping = 1;
        pthread_cond_signal(&w->wake);
        pthread_mutex_unlock(&w->lock);
        pthread_join(w->thread, NULL);
        w->running = 0;
    }
}

unsigned long kiln_mhd_deadline_cuts(struct kiln_mhd_options *options) {
    struct kiln_watch *w = options->watch;
    if (w == NULL) return 0;
    pthread_mutex_lock(&w->lock);
    unsigned long cuts = w->cuts;
    pthread_mutex_unlock(&w->lock);
    return cuts;
}

// Frees a stopped watch; every connection's entry was freed when it closed.
static void kiln_watch_free(struct kiln_mhd_options *options) {
    struct kiln_watch *w = options->watch;
    if (w == NULL) return;
    pthread_cond_destroy(&w->wake);
    pthread_mutex_destroy(&w->lock);
    free(w);
    options->watch = NULL;
}

void kiln_mhd_stop(struct MHD_Daemon *daemon, struct kiln_mhd_options *options) {
    kiln_watch_stop(options->watch);
    MHD_stop_daemon(daemon);  // closes every connection
    kiln_watch_free(options);
}

static struct kiln_watch *kiln_watch_new(struct kiln_mhd_options *options) {
    struct kiln_watch *w = calloc(1, sizeof *w);
    if (w == NULL) return NULL;
    pthread_mutex_init(&w->lock, NULL);
    pthread_condattr_t attributes;
    pthread_condattr_init(&attributes);
    pthread_condattr_setclock(&attributes, CLOCK_MONOTONIC);
    pthread_cond_init(&w->wake, &attributes);
    pthread_condattr_destroy(&attributes);
    w->deadline = options->request_deadline_seconds;
    w->access = options->access_handler;
    w->completed = options->request_completed;
    return w;
}

struct MHD_Daemon *kiln_mhd_start(struct kiln_mhd_options *options) {
    unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    if (options->address != NULL && options->address->sa_family == AF_INET6) {
        flags |= MHD_USE_IPv6;
    }
    if (options->logger != NULL) {
        flags |= MHD_USE_ERROR_LOG;
    }
    struct kiln_watch *watch = NULL;
    if (options->request_deadline_seconds > 0) {
        watch = kiln_watch_new(options);
        if (watch == NULL) return NULL;
    }
    options->watch = watch;
    struct MHD_OptionItem items[16];
    int n = 0;
    // The logger must come first, or libmicrohttpd reports problems with the other
    // options on stderr.
    if (options->logger != NULL) {
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_EXTERNAL_LOGGER, (intptr_t)kiln_mhd_log_trampoline, options };
    }
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_SOCK_ADDR, 0, (void *)options->address };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_THREAD_POOL_SIZE, options->thread_pool_size, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_TIMEOUT, options->connection_timeout_seconds, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_MEMORY_LIMIT, (intptr_t)options->connection_memory_limit, NULL };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_CONNECTION_LIMIT, options->connection_limit, NULL };
    // No MHD_OPTION_LISTENING_ADDRESS_REUSE: its default (SO_REUSEADDR) lets a restarted
    // daemon bind its port again with connections in TIME_WAIT; 1 would add SO_REUSEPORT,
    // under which a second process binds the same port and takes half the connections.
    if (watch != NULL) {
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_CONNECTION, (intptr_t)kiln_notify_connection, watch };
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)kiln_completed, options };
    } else {
        items[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)options->request_completed, options->request_completed_cls };
    }
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)options->uri_log, options->uri_log_cls };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };

    uint16_t port = 0;  // ignored: MHD_OPTION_SOCK_ADDR carries the port
    struct MHD_Daemon *daemon = watch == NULL
        ? MHD_start_daemon(flags, port, NULL, NULL, options->access_handler, options->access_handler_cls,
                           MHD_OPTION_ARRAY, items, MHD_OPTION_END)
        : MHD_start_daemon(flags, port, NULL, NULL, kiln_access, options, MHD_OPTION_ARRAY, items, MHD_OPTION_END);
    if (watch != NULL) {
        int saved = errno;
        if (daemon != NULL && pthread_create(&watch->thread, NULL, kiln_watch_run, watch) == 0) {
            watch->running = 1;
        } else if (daemon != NULL) {
            MHD_stop_daemon(daemon);
            daemon = NULL;
            saved = EAGAIN;
        }
        if (daemon == NULL) kiln_watch_free(options);
        errno = saved;
    }
    return daemon;
}

uint16_t kiln_mhd_bound_port(struct MHD_Daemon *daemon) {
    const union MHD_DaemonInfo *info = MHD_get_daemon_info(daemon, MHD_DAEMON_INFO_BIND_PORT);
    return info == NULL ? 0 : info->port;
}

int kiln_mhd_client_address(struct MHD_Connection *connection, char *buffer, size_t length) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
    if (info == NULL || info->client_addr == NULL || length == 0) {
        return -1;
    }
    const struct sockaddr *address = info->client_addr;
    const void *raw = NULL;
    if (address->sa_family == AF_INET) {
        raw = &((const struct sockaddr_in *)address)->sin_addr;
    } else if (address->sa_family == AF_INET6) {
        raw = &((const struct sockaddr_in6 *)address)->sin6_addr;
    } else {
        return -1;
    }
    return inet_ntop(address->sa_family, raw, buffer, (socklen_t)length) == NULL ? -1 : 0;
}

int kiln_mhd_connection_fd(struct MHD_Connection *connection) {
    const union MHD_ConnectionInfo *info = MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
    return info == NULL ? -1 : info->connect_fd;
}

// POLLRDHUP (Linux) is the peer's FIN: a client waiting for a response does not shut its
// writing half, so that is a client gone.
int kiln_socket_hung_up(int fd) {
    struct pollfd p = { .fd = fd, .events = POLLRDHUP, .revents = 0 };
    int n = poll(&p, 1, 0);
    if (n < 0) return -1;
    return n > 0 && (p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)) != 0;
}
