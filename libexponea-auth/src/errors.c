/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <string.h>

#include "internal.h"

int error_from_varlink(const char *name, size_t length) {
        static const struct {
                const char *name;
                int code;
        } known[] = {
                {"com.exponea.Auth.MalformedToken", EBADMSG},
                {"com.exponea.Auth.InvalidGroupName", EINVAL},
                {"com.exponea.Auth.PermissionDenied", EACCES},
                {"com.exponea.Auth.StoreFailure", EIO},
                {"com.exponea.Auth.TooManySubscribers", EUSERS},
                {"com.exponea.Auth.SubscriptionDropped", ECONNRESET},
                {"org.varlink.service.InvalidParameter", EINVAL},
        };
        for (size_t i = 0; i < sizeof known / sizeof *known; i++)
                if (strlen(known[i].name) == length && memcmp(known[i].name, name, length) == 0) return -known[i].code;
        return -EPROTO;
}

_Pragma("GCC visibility push(default)")

const char *exponea_auth_strerror(int error) {
        switch (-error) {
        case 0: return "Success";
        case EINVAL: return "Invalid argument, or a group name that is not 1-128 of A-Z a-z 0-9 . _ - (no leading dot)";
        case ENOMEM: return "Out of memory";
        case ENOBUFS: return "The buffer is too small for the token (EXPONEA_AUTH_TOKEN_MAX + 1 bytes always suffice)";
        case ENOKEY: return "The app group has no token, or none came in time";
        case EBADMSG: return "Not a stream JWT: nothing was stored";
        case EACCES: return "This user may not use the app group (see exponea-authd.conf(5))";
        case EIO: return "The daemon could not write its token store; the previous token is kept";
        case EUSERS: return "The app group has as many subscribers as the daemon allows";
        case EPERM: return "The server on the socket runs as a user that is not trusted to hold tokens";
        case ETIMEDOUT: return "The daemon did not answer within the call timeout";
        case ECONNREFUSED: return "No daemon listens on the socket (is exponea-authd.socket running?)";
        case ENOENT: return "The daemon's socket does not exist (is exponea-authd.socket running?)";
        case ECONNRESET: return "The connection to the daemon was lost; the next call connects again";
        case EPROTO: return "The daemon answered something this library does not understand";
        case EMSGSIZE: return "The daemon's reply is larger than 64 KiB";
        case ENAMETOOLONG: return "The socket path is too long for a Unix socket";
        default: {
                const char *text = strerrordesc_np(-error);
                return text ? text : "Unknown error";
        }
        }
}

_Pragma("GCC visibility pop")
