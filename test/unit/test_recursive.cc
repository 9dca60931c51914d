/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * The calls recursive ifuncs use, in one process: ucp_ifunc_code_get from
 * inside a running NAME_main (reenter calls back into the test), and
 * ucp_ifunc_msg_build. The multi-process chains are test/mpi/propagate.c.
 */
#include "fixture.h"

#include "../ifuncs/test_ifunc.h"

namespace test {
namespace {

/* Parameters of ucp_ifunc_code_get: @a mask and @a name, the rest zero. */
ucp_ifunc_code_params_t code_params(uint64_t mask, const char *name)
{
    ucp_ifunc_code_params_t params = {};
    params.field_mask              = mask;
    params.name                    = name;
    return params;
}

class Recursive : public UnitTest {
public:
    /* Runs reenter in @a context; calls @a inside from its NAME_main. */
    template <typename Fn>
    void run_inside(ucp_context_h context, Fn inside)
    {
        std::vector<uint64_t> frame = frame_of("reenter", nullptr, 0);
        reenter_args          args  = {};
        args.callback     = [](void *arg) { (*static_cast<Fn *>(arg))(); };
        args.callback_arg = &inside;
        ASSERT_EQ(UCS_OK, ucp_poll_ifunc(context, frame.data(),
                                         frame.size() * 8, &args));
        ASSERT_EQ(1u, args.returned);
    }

    /* A message of @a ifunc with @a size bytes of payload. */
    static ucs_status_t build(ucp_ifunc_h ifunc, const void *payload,
                              size_t size, ucp_ifunc_msg_t *msg)
    {
        ucp_ifunc_msg_params_t params = {};
        params.field_mask             = UCP_IFUNC_MSG_FIELD_PAYLOAD;
        params.payload                = payload;
        params.payload_size           = size;
        return ucp_ifunc_msg_build(ifunc, &params, msg);
    }
};

TEST_F(Recursive, RunningCodeIsAHandleThatSendsItself)
{
    Context         target;
    ucp_ifunc_h     self    = nullptr;
    ucp_ifunc_msg_t again   = {};
    ucs_status_t    created = UCS_OK;
    run_inside(target.get(), [&] {
        ASSERT_EQ(UCS_OK, ucp_ifunc_code_get(nullptr, nullptr, &self));
        /* Received code has no payload functions. */
        created = ucp_ifunc_msg_create(self, nullptr, 0, &again);
        ASSERT_EQ(UCS_OK, build(self, nullptr, 0, &again));
    });
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, created);
    ASSERT_NE(nullptr, self);

    /* The message it built is the same code, so it runs in the same
     * context's copy of it, and as well in a context that never saw it. */
    std::vector<uint64_t> original = frame_of("reenter", nullptr, 0);
    EXPECT_EQ(0, std::memcmp(original.data() + 2,
                             static_cast<uint64_t *>(again.frame) + 2, 8));
    EXPECT_EQ(0, std::memcmp(original.data() + 4,
                             static_cast<uint64_t *>(again.frame) + 4, 8));
    Context      other;
    reenter_args args = {};
    args.callback     = [](void *) {};
    std::vector<char> copy(static_cast<char *>(again.frame),
                           static_cast<char *>(again.frame) + again.frame_size);
    EXPECT_EQ(UCS_OK,
              ucp_poll_ifunc(other.get(), copy.data(), copy.size(), &args));
    EXPECT_EQ(1u, args.returned);
    ucp_ifunc_msg_free(again);
    ucp_deregister_ifunc(nullptr, self);
}

TEST_F(Recursive, HeldCodeByName)
{
    Context                 target;
    ucp_ifunc_h             held = nullptr;
    ucp_ifunc_code_params_t by_name =
            code_params(UCP_IFUNC_CODE_PARAM_FIELD_NAME, "tally");
    uint64_t calls = 0;
    /* Nothing linked and no tally.so registered by this context: found
     * through UCX_IFUNC_LIB_DIR as a registration would. */
    ASSERT_EQ(UCS_OK, ucp_ifunc_code_get(target.get(), &by_name, &held));
    ucp_deregister_ifunc(target.get(), held);

    std::vector<uint64_t> tally = frame_of("tally", nullptr, 0);
    ASSERT_EQ(UCS_OK, ucp_poll_ifunc(target.get(), tally.data(),
                                     tally.size() * 8, &calls));
    ASSERT_EQ(UCS_OK, ucp_ifunc_code_get(target.get(), &by_name, &held));
    ucp_ifunc_msg_t msg;
    ASSERT_EQ(UCS_OK, build(held, nullptr, 0, &msg));
    EXPECT_EQ(UCS_OK,
              ucp_poll_ifunc(target.get(), msg.frame, msg.frame_size, &calls));
    EXPECT_EQ(2u, calls); /* the same copy of the code ran it */
    ucp_ifunc_msg_free(msg);
    ucp_deregister_ifunc(target.get(), held);

    ucp_ifunc_code_params_t unknown =
            code_params(UCP_IFUNC_CODE_PARAM_FIELD_NAME, "nosuch");
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              ucp_ifunc_code_get(target.get(), &unknown, &held));
}

TEST_F(Recursive, BadArgumentsAreRefused)
{
    Context     target;
    ucp_ifunc_h handle;
    /* Outside NAME_main, and inside a message of another context. */
    EXPECT_EQ(UCS_ERR_NO_ELEM, ucp_ifunc_code_get(nullptr, nullptr, &handle));
    Context      other;
    ucs_status_t inside = UCS_OK;
    run_inside(target.get(), [&] {
        inside = ucp_ifunc_code_get(other.get(), nullptr, &handle);
    });
    EXPECT_EQ(UCS_ERR_NO_ELEM, inside);

    ucp_ifunc_code_params_t bad_name =
            code_params(UCP_IFUNC_CODE_PARAM_FIELD_NAME, "no-such");
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_code_get(target.get(), &bad_name, &handle));
    ucp_ifunc_code_params_t unknown_field = code_params(UCS_BIT(7), nullptr);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_code_get(target.get(), &unknown_field, &handle));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_code_get(target.get(), nullptr, nullptr));

    ucp_ifunc_h tally;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(target.get(), "tally", &tally));
    ucp_ifunc_msg_t        msg;
    ucp_ifunc_msg_params_t params = {};
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_msg_build(tally, &params, &msg));
    params.field_mask =
            UCP_IFUNC_MSG_FIELD_PAYLOAD | UCP_IFUNC_MSG_FIELD_SOURCE_ARGS;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_msg_build(tally, &params, &msg));
    params.field_mask   = UCP_IFUNC_MSG_FIELD_PAYLOAD;
    params.payload_size = 8; /* and no payload */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_msg_build(tally, &params, &msg));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, ucp_ifunc_msg_build(tally, nullptr, &msg));
    /* Source arguments go through the library's payload functions. */
    params.field_mask = UCP_IFUNC_MSG_FIELD_SOURCE_ARGS;
    ASSERT_EQ(UCS_OK, ucp_ifunc_msg_build(tally, &params, &msg));
    uint64_t calls = 0;
    EXPECT_EQ(UCS_OK,
              ucp_poll_ifunc(target.get(), msg.frame, msg.frame_size, &calls));
    EXPECT_EQ(1u, calls);
    ucp_ifunc_msg_free(msg);
    ucp_deregister_ifunc(target.get(), tally);
}

} // namespace
} // namespace test
