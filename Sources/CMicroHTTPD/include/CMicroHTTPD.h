// libmicrohttpd for Swift. Swift cannot call C variadic functions, and
// MHD_start_daemon, MHD_get_daemon_info and MHD_get_connection_info are all variadic,
// so this header declares small non-variadic wrappers around them (shim.c).
#ifndef KILN_CMICROHTTPD_H
#define KILN_CMICROHTTPD_H

#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <sys/socket.h>
#include <microhttpd.h>

typedef void *(*kiln_mhd_uri_log_fn)(void *cls, const char *uri, struct MHD_Connection *connection);
typedef void (*kiln_mhd_log_fn)(void *cls, const char *message);

// Everything kiln_mhd_start passes to MHD_start_daemon. The struct must stay alive (at
// the same address) until MHD_stop_daemon returns: libmicrohttpd's error logger is
// handed a pointer to it.
struct kiln_mhd_options {
    const struct sockaddr *address;      // sockaddr_in or sockaddr_in6; port 0 = any free port
    unsigned int thread_pool_size;
    unsigned int connection_timeout_seconds;
    size_t connection_memory_limit;
    unsigned int connection_limit;
    MHD_AccessHandlerCallback access_handler;
    void *access_handler_cls;
    MHD_RequestCompletedCallback request_completed;
    void *request_completed_cls;
    kiln_mhd_uri_log_fn uri_log;
    void *uri_log_cls;
    kiln_mhd_log_fn logger;              // NULL: libmicrohttpd stays silent
    void *logger_cls;
    // A request's head, and then its body, must each arrive within this many seconds
    // (the head counted from the connection's start or the previous response's end);
    // 0: no deadline. libmicrohttpd's idle timeout restarts with every byte, so without
    // it a client trickling a header a byte at a time holds its connection for ever.
    unsigned int request_deadline_seconds;
    void *watch;                         // kiln_mhd_start's; kiln_mhd_stop frees it
};

// Internal polling threads (a pool of thread_pool_size), suspend/resume allowed (the
// event streams park idle connections), IPv6 when the address is IPv6.
struct MHD_Daemon *kiln_mhd_start(struct kiln_mhd_options *options);

// Stops the request-deadline watch, then the daemon (MHD_stop_daemon).
void kiln_mhd_stop(struct MHD_Daemon *daemon, struct kiln_mhd_options *options);

// Connections the deadline watch has cut since the daemon started.
unsigned long kiln_mhd_deadline_cuts(struct kiln_mhd_options *options);

// The port the daemon's listening socket is bound to (the real one after port 0), or 0.
uint16_t kiln_mhd_bound_port(struct MHD_Daemon *daemon);

// The client's IP address as text ("127.0.0.1", "::1") into buffer; 0 on success.
int kiln_mhd_client_address(struct MHD_Connection *connection, char *buffer, size_t length);

// The connection's socket, or -1.
int kiln_mhd_connection_fd(struct MHD_Connection *connection);

// 1 when the peer of socket fd has closed its end (or the socket failed), 0 when it has
// not, without waiting; -1 when poll itself fails.
int kiln_socket_hung_up(int fd);

#endif
