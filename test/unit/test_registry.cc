/*
 * Copyright (c) 2026 ucx-ifunc authors. See LICENSE for terms.
 *
 * Registration, message creation and sending: bad input gets a clear status,
 * registration is safe from several threads, and one process can send to
 * itself.
 */
#include "fixture.h"

#include "../common/frames.h"
#include "../ifuncs/test_ifunc.h"

#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <thread>

namespace test {
namespace {

class Registry : public UnitTest {
protected:
    void TearDown() override
    {
        setenv("UCX_IFUNC_LIB_DIR", UCX_IFUNC_TEST_LIB_DIR, 1);
    }

    ucs_status_t register_name(const char *name)
    {
        ucp_ifunc_h  ifunc  = nullptr;
        ucs_status_t status = ucp_register_ifunc(context(), name, &ifunc);
        if (status == UCS_OK) {
            ucp_deregister_ifunc(context(), ifunc);
        } else {
            EXPECT_EQ(nullptr, ifunc);
        }
        return status;
    }
};

TEST_F(Registry, BadNamesAreInvalid)
{
    for (const char *name :
         {"", "9lives", "../counter", "counter.so", "a b", "x/y"}) {
        EXPECT_EQ(UCS_ERR_INVALID_PARAM, register_name(name)) << name;
    }
    EXPECT_EQ(UCS_ERR_INVALID_PARAM, register_name(nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              register_name(std::string(UCP_IFUNC_NAME_MAX + 1, 'a').c_str()));
    ucp_ifunc_h ifunc;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_register_ifunc(nullptr, "counter", &ifunc));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_register_ifunc(context(), "counter", nullptr));
}

TEST_F(Registry, MissingOrForeignLibrariesAreNotFound)
{
    /* The longest valid name: valid, but there is no such library. */
    EXPECT_EQ(UCS_ERR_NO_ELEM,
              register_name(std::string(UCP_IFUNC_NAME_MAX, 'a').c_str()));
    /* An ordinary shared library is not an ifunc library. */
    EXPECT_EQ(UCS_ERR_NO_ELEM, register_name("plain"));
    unsetenv("UCX_IFUNC_LIB_DIR");
    EXPECT_EQ(UCS_ERR_NO_ELEM, register_name("stress")); /* not loaded yet */
}

TEST_F(Registry, ForeignLibraryIsLoadedOnce)
{
    unsetenv("IFUNC_TEST_PLAIN_LOADS");
    for (int i = 0; i < 5; ++i) {
        EXPECT_EQ(UCS_ERR_NO_ELEM, register_name("plain"));
    }
    /* Once, or not at all if an earlier test of this process loaded it. */
    const char *loads = getenv("IFUNC_TEST_PLAIN_LOADS");
    EXPECT_LE(loads ? atoi(loads) : 0, 1) << "its constructor ran again";
}

TEST_F(Registry, LibraryOutsideTheDirectoryIsRefused)
{
    char templ[] = "/tmp/ucx-ifunc-links-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(templ));
    std::string dir     = templ;
    std::string outside = std::string(UCX_IFUNC_TEST_LIB_DIR) + "/counter.so";
    ASSERT_EQ(0, symlink(outside.c_str(), (dir + "/counter.so").c_str()));
    ASSERT_EQ(0, mkdir((dir + "/inside").c_str(), 0755));
    ASSERT_EQ(0, symlink((dir + "/counter.so").c_str(),
                         (dir + "/inside/echo.so").c_str()));
    setenv("UCX_IFUNC_LIB_DIR", dir.c_str(), 1);
    EXPECT_EQ(UCS_ERR_NO_ELEM, register_name("counter"));
    setenv("UCX_IFUNC_LIB_DIR", (dir + "/inside").c_str(), 1);
    EXPECT_EQ(UCS_ERR_NO_ELEM, register_name("echo")); /* via a link */
    unlink((dir + "/inside/echo.so").c_str());
    rmdir((dir + "/inside").c_str());
    unlink((dir + "/counter.so").c_str());
    rmdir(dir.c_str());
}

TEST_F(Registry, WorldWritableDirectoryIsWarnedAbout)
{
    char templ[] = "/tmp/ucx-ifunc-open-XXXXXX";
    ASSERT_NE(nullptr, mkdtemp(templ));
    std::string dir = templ;
    ASSERT_EQ(0, chmod(dir.c_str(), 0777));
    std::string copy = "cp " + std::string(UCX_IFUNC_TEST_LIB_DIR) +
                       "/counter.so " + dir + "/";
    ASSERT_EQ(0, system(copy.c_str()));
    setenv("UCX_IFUNC_LIB_DIR", dir.c_str(), 1);
    {
        WarningCounter warnings("writable by every user");
        EXPECT_EQ(UCS_OK, register_name("counter"));
        EXPECT_EQ(1, warnings.count());
    }
    unlink((dir + "/counter.so").c_str());
    rmdir(dir.c_str());
}

TEST_F(Registry, PayloadFunctionFailuresAreReported)
{
    ucp_ifunc_h     ifunc;
    ucp_ifunc_msg_t msg = {};
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(context(), "faulty", &ifunc));
    char fail[] = "F", overflow[] = "O", fine[] = "ok";
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_msg_create(ifunc, fail, sizeof(fail), &msg));
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              ucp_ifunc_msg_create(ifunc, overflow, sizeof(overflow), &msg));
    ASSERT_EQ(UCS_OK, ucp_ifunc_msg_create(ifunc, fine, sizeof(fine), &msg));
    ucp_ifunc_msg_free(msg);
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_msg_create(nullptr, fine, sizeof(fine), &msg));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_msg_create(ifunc, fine, sizeof(fine), nullptr));
    ucp_deregister_ifunc(context(), ifunc);
    ucp_ifunc_msg_free({nullptr, 0});
    ucp_deregister_ifunc(context(), nullptr);
}

TEST_F(Registry, MessagesOutliveTheirRegistration)
{
    ucp_ifunc_h     ifunc;
    ucp_ifunc_msg_t msg;
    int64_t         add = 3;
    ASSERT_EQ(UCS_OK, ucp_register_ifunc(context(), "counter", &ifunc));
    ASSERT_EQ(UCS_OK, ucp_ifunc_msg_create(ifunc, &add, sizeof(add), &msg));
    ucp_deregister_ifunc(context(), ifunc);

    std::vector<uint64_t> buffer(msg.frame_size / 8);
    std::memcpy(buffer.data(), msg.frame, msg.frame_size);
    ucp_ifunc_msg_free(msg);
    int64_t counter = 0;
    EXPECT_EQ(UCS_OK, ucp_poll_ifunc(context(), buffer.data(),
                                     buffer.size() * 8, &counter));
    EXPECT_EQ(3, counter);
}

TEST_F(Registry, ConcurrentRegistrationAndCreation)
{
    std::atomic<int>         failures{0};
    std::vector<std::thread> threads;
    for (int t = 0; t < 8; ++t) {
        threads.emplace_back([&, t]() {
            const char *name = (t % 2) ? "counter" : "echo";
            for (int i = 0; i < 200; ++i) {
                ucp_ifunc_h     ifunc;
                ucp_ifunc_msg_t msg;
                if ((ucp_register_ifunc(context(), name, &ifunc) != UCS_OK) ||
                    (ucp_ifunc_msg_create(ifunc, nullptr, 0, &msg) != UCS_OK)) {
                    failures++;
                    continue;
                }
                ucp_ifunc_msg_free(msg);
                ucp_deregister_ifunc(context(), ifunc);
            }
        });
    }
    for (auto &thread : threads) {
        thread.join();
    }
    EXPECT_EQ(0, failures.load());
}

/* One process sends a counter message to itself over UCX's loopback. */
class SendToSelf : public Registry {
protected:
    void SetUp() override
    {
        Registry::SetUp();
        worker_ = std::make_unique<Worker>(context());
        buffer_ = std::make_unique<RemoteBuffer>(context(), *worker_, *worker_);
        ASSERT_EQ(UCS_OK, ucp_register_ifunc(context(), "counter", &ifunc_));
        ASSERT_EQ(UCS_OK, ucp_ifunc_msg_create(ifunc_, nullptr, 0, &msg_));
    }

    void TearDown() override
    {
        ucp_ifunc_msg_free(msg_);
        ucp_deregister_ifunc(context(), ifunc_);
        buffer_.reset();
        worker_.reset();
        Registry::TearDown();
    }

    ucp_ep_h   ep() const { return buffer_->ep.get(); }
    ucp_rkey_h rkey() const { return buffer_->rkey.get(); }
    uint64_t   remote() const { return buffer_->address; }

    /* After a send that returned @a status: flush, then the counter
     * message runs once in the buffer. */
    void expect_delivered(ucs_status_t status)
    {
        ASSERT_FALSE(UCS_STATUS_IS_ERR(status));
        ASSERT_EQ(UCS_OK, buffer_->ep.flush(deadline_in(10)));
        int64_t counter = 0;
        EXPECT_EQ(UCS_OK, poll_until_result(context(), *worker_,
                                            buffer_->memory, &counter));
        EXPECT_EQ(1, counter);
    }

    std::unique_ptr<Worker>       worker_;
    std::unique_ptr<RemoteBuffer> buffer_;
    ucp_ifunc_h                   ifunc_ = nullptr;
    ucp_ifunc_msg_t               msg_   = {};
};

TEST_F(SendToSelf, BadSendArgumentsThenDelivery)
{
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_send_nbix(nullptr, msg_, remote(), rkey()));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_send_nbix(ep(), msg_, remote(), nullptr));
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_send_nbix(ep(), msg_, remote() + 4, rkey()));
    ucp_ifunc_msg_t damaged = msg_;
    damaged.frame_size -= 8;
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_send_nbix(ep(), damaged, remote(), rkey()));

    expect_delivered(ucp_ifunc_send_nbix(ep(), msg_, remote(), rkey()));
}

TEST_F(SendToSelf, SendNbxParameters)
{
    ucp_ifunc_send_params_t params = {};
    params.field_mask              = uint64_t(1) << 40; /* no such field */
    EXPECT_EQ(UCS_ERR_INVALID_PARAM,
              ucp_ifunc_send_nbx(ep(), msg_, remote(), rkey(), &params));

    /* Too small a remote buffer: refused, nothing written. */
    params.field_mask  = UCP_IFUNC_SEND_FIELD_REMOTE_SIZE;
    params.remote_size = msg_.frame_size - 8;
    EXPECT_EQ(UCS_ERR_EXCEEDS_LIMIT,
              ucp_ifunc_send_nbx(ep(), msg_, remote(), rkey(), &params));
    EXPECT_EQ(0, *reinterpret_cast<uint64_t *>(buffer_->memory.address()));

    /* Exactly large enough, with the worker: delivered; NULL params too. */
    params.field_mask |= UCP_IFUNC_SEND_FIELD_WORKER;
    params.remote_size = msg_.frame_size;
    params.worker      = worker_->get();
    expect_delivered(ucp_ifunc_send_nbx(ep(), msg_, remote(), rkey(), &params));
    expect_delivered(ucp_ifunc_send_nbx(ep(), msg_, remote(), rkey(), nullptr));
}

} // namespace
} // namespace test
