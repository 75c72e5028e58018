#include "CMicroHTTPD.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <stdio.h>
#include <string.h>

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

struct MHD_Daemon *kiln_mhd_start(struct kiln_mhd_options *options) {
    unsigned int flags = MHD_USE_AUTO_INTERNAL_THREAD | MHD_ALLOW_SUSPEND_RESUME;
    if (options->address != NULL && options->address->sa_family == AF_INET6) {
        flags |= MHD_USE_IPv6;
    }
    if (options->logger != NULL) {
        flags |= MHD_USE_ERROR_LOG;
    }
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
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_NOTIFY_COMPLETED, (intptr_t)options->request_completed, options->request_completed_cls };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_URI_LOG_CALLBACK, (intptr_t)options->uri_log, options->uri_log_cls };
    items[n++] = (struct MHD_OptionItem){ MHD_OPTION_END, 0, NULL };

    uint16_t port = 0;  // ignored: MHD_OPTION_SOCK_ADDR carries the port
    return MHD_start_daemon(flags, port, NULL, NULL,
                            options->access_handler, options->access_handler_cls,
                            MHD_OPTION_ARRAY, items,
                            MHD_OPTION_END);
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
