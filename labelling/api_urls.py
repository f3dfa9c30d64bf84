from rest_framework.routers import DefaultRouter

from labelling.api import LabellingJobViewSet

router = DefaultRouter()
router.register("labelling-jobs", LabellingJobViewSet, basename="labelling-job")
urlpatterns = router.urls
