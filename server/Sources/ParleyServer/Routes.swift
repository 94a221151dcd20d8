enum RouteHandler {
    case plain(Handler)
    case events
}

/// Path patterns ("*" matches one segment) → handlers per method.
enum Routes {
    nonisolated(unsafe) static let table: [([String], [String: RouteHandler])] = [
        (["users"], ["GET": .plain(Users.list), "POST": .plain(Users.create)]),
        (["users", "*"], ["GET": .plain(Users.get), "PUT": .plain(Users.update), "DELETE": .plain(Users.delete)]),
        (["users", "*", "token"], ["POST": .plain(Users.issueToken)]),
        (["users", "*", "unread_message_count"], ["GET": .plain(Users.unreadMessageCount)]),
        (["users", "*", "unread_channel_count"], ["GET": .plain(Users.unreadChannelCount)]),
        (["users", "*", "mark_as_read_all"], ["PUT": .plain(Users.markAllAsRead)]),
        (["users", "*", "channel_invitation_preference"], ["GET": .plain(Users.getInvitationPreference), "PUT": .plain(Users.setInvitationPreference)]),
        (["users", "*", "my_group_channels"], ["GET": .plain(Channels.listMine)]),
        (["users", "*", "my_group_channels", "changelogs"], ["GET": .plain(Sync.channelChangelogs)]),
        (["users", "*", "my_group_channels", "leave"], ["PUT": .plain(Users.leaveAll)]),
        (["users", "*", "events"], ["GET": .events]),
        (["group_channels"], ["GET": .plain(Channels.listAll), "POST": .plain(Channels.create)]),
        (["group_channels", "*"], ["GET": .plain(Channels.get), "PUT": .plain(Channels.update), "DELETE": .plain(Channels.delete)]),
        (["group_channels", "*", "invite"], ["POST": .plain(Channels.invite)]),
        (["group_channels", "*", "accept"], ["PUT": .plain(Channels.accept)]),
        (["group_channels", "*", "decline"], ["PUT": .plain(Channels.decline)]),
        (["group_channels", "*", "join"], ["PUT": .plain(Channels.join)]),
        (["group_channels", "*", "leave"], ["PUT": .plain(Channels.leave)]),
        (["group_channels", "*", "freeze"], ["PUT": .plain(Moderation.freeze)]),
        (["group_channels", "*", "hide"], ["PUT": .plain(Channels.hide), "DELETE": .plain(Channels.unhide)]),
        (["group_channels", "*", "reset_user_history"], ["PUT": .plain(Channels.resetHistory)]),
        (["group_channels", "*", "typing"], ["POST": .plain(Channels.startTyping), "DELETE": .plain(Channels.endTyping)]),
        (["group_channels", "*", "members"], ["GET": .plain(Channels.members)]),
        (["group_channels", "*", "members", "*"], ["GET": .plain(Channels.isMember)]),
        (["group_channels", "*", "operators"], ["GET": .plain(Moderation.listOperators), "POST": .plain(Moderation.addOperators), "DELETE": .plain(Moderation.removeOperators)]),
        (["group_channels", "*", "ban"], ["GET": .plain(Moderation.listBans), "POST": .plain(Moderation.ban)]),
        (["group_channels", "*", "ban", "*"], ["GET": .plain(Moderation.getBan), "DELETE": .plain(Moderation.unban)]),
        (["group_channels", "*", "mute"], ["GET": .plain(Moderation.listMutes), "POST": .plain(Moderation.mute)]),
        (["group_channels", "*", "mute", "*"], ["GET": .plain(Moderation.getMute), "DELETE": .plain(Moderation.unmute)]),
        (["group_channels", "*", "metadata"], ["GET": .plain(Meta.getAll), "POST": .plain(Meta.create), "PUT": .plain(Meta.updateMany), "DELETE": .plain(Meta.deleteAll)]),
        (["group_channels", "*", "metadata", "*"], ["GET": .plain(Meta.getOne), "PUT": .plain(Meta.updateOne), "DELETE": .plain(Meta.deleteOne)]),
        (["group_channels", "*", "metacounter"], ["GET": .plain(Meta.getAll), "POST": .plain(Meta.create), "PUT": .plain(Meta.updateMany), "DELETE": .plain(Meta.deleteAll)]),
        (["group_channels", "*", "metacounter", "*"], ["GET": .plain(Meta.getOne), "PUT": .plain(Meta.updateOne), "DELETE": .plain(Meta.deleteOne)]),
        (["group_channels", "*", "messages"], ["GET": .plain(Messages.list), "POST": .plain(Messages.send)]),
        (["group_channels", "*", "messages", "mark_as_read"], ["PUT": .plain(Channels.markAsRead)]),
        (["group_channels", "*", "messages", "mark_as_delivered"], ["PUT": .plain(Channels.markAsDelivered)]),
        (["group_channels", "*", "messages", "total_count"], ["GET": .plain(Messages.totalCount)]),
        (["group_channels", "*", "messages", "changelogs"], ["GET": .plain(Sync.messageChangelogs)]),
        (["group_channels", "*", "messages_gap"], ["GET": .plain(Sync.messagesGap)]),
        (["group_channels", "*", "messages", "*"], ["GET": .plain(Messages.get), "PUT": .plain(Messages.update), "DELETE": .plain(Messages.delete)]),
        (["group_channels", "*", "messages", "*", "reactions"], ["GET": .plain(Messages.listReactions), "POST": .plain(Messages.addReaction), "DELETE": .plain(Messages.removeReaction)]),
        (["group_channels", "*", "messages", "*", "pin"], ["POST": .plain(Messages.pin), "DELETE": .plain(Messages.unpin)]),
        (["group_channels", "*", "messages", "*", "copy"], ["POST": .plain(Messages.copy)]),
        (["group_channels", "*", "messages", "*", "sorted_metaarray"], ["POST": .plain(Messages.addMetaArray), "PUT": .plain(Messages.updateMetaArray)]),
        (["files", "*"], ["GET": .plain(Files.download)]),
        (["files", "*", "*"], ["GET": .plain(Files.download)]),
        (["report"], ["GET": .plain(Reports.list)]),
        (["report", "group_channels", "*"], ["POST": .plain(Reports.reportChannel)]),
        (["report", "group_channels", "*", "messages", "*"], ["POST": .plain(Reports.reportMessage)]),
        (["report", "users", "*"], ["POST": .plain(Reports.reportUser)]),
    ]

    static func resolve(method: String, segments: [String]) throws -> RouteHandler {
        var best: [String: RouteHandler]? = nil
        var bestLiterals = -1
        for (pattern, handlers) in table where pattern.count == segments.count {
            var ok = true
            var literals = 0
            for (p, s) in zip(pattern, segments) {
                if p == "*" { if s.isEmpty { ok = false; break } } else if p == s { literals += 1 } else { ok = false; break }
            }
            // A literal segment beats a wildcard (".../messages/changelogs" vs ".../messages/{id}").
            if ok && literals > bestLiterals {
                best = handlers
                bestLiterals = literals
            }
        }
        guard let handlers = best else { throw APIError.notFound("Route") }
        let effective = method == "HEAD" ? "GET" : method
        guard let handler = handlers[effective] else { throw APIError.methodNotAllowed }
        return handler
    }
}
